// Package cpe reads CPE 2.3 formatted names and tells which ecosystem of
// the catalog a vendor's product belongs to, for the parsers that name
// products by a CPE (NVD's configurations, CISA-ADP's affected entries) or
// by the vendor's own words (a CNA's affected entries).
package cpe

import "strings"

// Name is the part of a CPE 2.3 name that identifies a product.
type Name struct {
	// Part is "a" (application), "o" (operating system) or "h" (hardware).
	Part    string
	Vendor  string
	Product string
}

// Parse splits a CPE 2.3 formatted string ("cpe:2.3:a:apache:log4j:2.0:*:…")
// into its part, vendor and product, with the backslash escapes removed
// ("net\/http" is "net/http"). ok is false for a string that is not one or
// that names no vendor or product (empty, "*" or "-").
func Parse(s string) (n Name, ok bool) {
	fields := split(s, 6)
	if len(fields) < 5 || fields[0] != "cpe" || fields[1] != "2.3" {
		return Name{}, false
	}
	n = Name{Part: fields[2], Vendor: fields[3], Product: fields[4]}
	if unnamed(n.Vendor) || unnamed(n.Product) {
		return Name{}, false
	}
	return n, true
}

func unnamed(s string) bool { return s == "" || s == "*" || s == "-" }

// split splits s at unescaped colons into at most n fields, removing the
// escapes.
func split(s string, n int) []string {
	var fields []string
	var cur strings.Builder
	for i := 0; i < len(s) && len(fields) < n; i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == ':':
			fields = append(fields, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if len(fields) < n {
		fields = append(fields, cur.String())
	}
	return fields
}

// Ecosystems of vendors' products (DESIGN.md, "The CVE catalog").
const (
	Apple     = "Apple"
	Windows   = "Windows"
	Microsoft = "Microsoft"
	Desktop   = "Desktop"
	Vendor    = "Vendor"
)

// desktopApps are well-known third-party desktop applications, by CPE
// vendor and product.
var desktopApps = map[string]bool{
	"google:chrome":                       true,
	"mozilla:firefox":                     true,
	"mozilla:firefox_esr":                 true,
	"mozilla:thunderbird":                 true,
	"7-zip:7-zip":                         true,
	"7-zip:7zip":                          true,
	"rarlab:winrar":                       true,
	"videolan:vlc_media_player":           true,
	"notepad-plus-plus:notepad++":         true,
	"libreoffice:libreoffice":             true,
	"the_document_foundation:libreoffice": true,
	"wireshark:wireshark":                 true,
	"simon_tatham:putty":                  true,
	"putty:putty":                         true,
	"filezilla-project:filezilla_client":  true,
	"winscp:winscp":                       true,
	"tortoisegit:tortoisegit":             true,
	"tigris:tortoisesvn":                  true,
	"zoom:zoom":                           true,
}

// Ecosystem classifies a vendor's product, named by a CPE or by the vendor
// ("Mozilla", "Firefox ESR" reads as mozilla:firefox_esr): Apple's products
// are Apple, Microsoft's Windows when the product is Windows and Microsoft
// otherwise, well-known third-party desktop applications Desktop, and
// anything else Vendor. part is the CPE's part, or "" for a vendor's own
// names; only an application ("a") is a desktop application.
func Ecosystem(part, vendor, product string) string {
	v, p := normalize(vendor), normalize(product)
	switch {
	case v == "apple" || v == "apple_inc.":
		return Apple
	case v == "microsoft" || v == "microsoft_corporation":
		if strings.HasPrefix(p, "windows") {
			return Windows
		}
		return Microsoft
	case (part == "" || part == "a") && desktopApps[v+":"+p]:
		return Desktop
	}
	return Vendor
}

// normalize writes a name as CPE names are written: lower case, words
// joined by underscores.
func normalize(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), "_"))
}
