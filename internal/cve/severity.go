package cve

import "math"

// SeverityOf returns the qualitative severity of a CVSS base score under the
// rating scale of its version, for sources that give a score without one.
// CVSS 2.0 knows LOW (below 4.0), MEDIUM (below 7.0) and HIGH. CVSS 3.0, 3.1
// and 4.0 add NONE (0.0) and CRITICAL (9.0 and above). It returns "" for an
// unknown version or a score outside 0..10.
func SeverityOf(version string, score float64) string {
	if math.IsNaN(score) || score < 0 || score > 10 {
		return ""
	}
	switch version {
	case "2.0":
		switch {
		case score < 4:
			return SeverityLow
		case score < 7:
			return SeverityMedium
		}
		return SeverityHigh
	case "3.0", "3.1", "4.0":
		switch {
		case score == 0:
			return SeverityNone
		case score < 4:
			return SeverityLow
		case score < 7:
			return SeverityMedium
		case score < 9:
			return SeverityHigh
		}
		return SeverityCritical
	}
	return ""
}
