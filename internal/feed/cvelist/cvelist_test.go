// The CVE List parser on real records. This file is over 600 lines
// because TestParseRecords is one table of records of the shared sample,
// each with what it must give (dates, metrics, CWEs, references, atoms),
// written out case by case.

package cvelist

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/patchline/patchline/internal/cve"
	"github.com/patchline/patchline/internal/feed/feedtest"
)

const dataDir = "cvelist"

func readFile(tb testing.TB, file string) []byte {
	tb.Helper()
	return feedtest.Sample(tb, path.Join(dataDir, file))
}

// parseFile parses one sample record and returns its facts.
func parseFile(tb testing.TB, file string) *cve.Facts {
	tb.Helper()
	rec := feedtest.Parse(tb, Parser, file, readFile(tb, file))
	if len(rec.Messages()) != 0 || len(rec.Received) != 1 {
		tb.Fatalf("parse %s: %d facts, rejects %v; want 1 facts, no rejects", file, len(rec.Received), rec.Messages())
	}
	return rec.Received[0]
}

// atomMaker returns a constructor of the atoms a record's source gives.
func atomMaker(id, source string) func(eco, product, fixed, rng string) cve.ProductAtom {
	return func(eco, product, fixed, rng string) cve.ProductAtom {
		a := cve.ProductAtom{Ecosystem: eco, Product: product, Atom: cve.Atom{
			FixedVersion: fixed,
			SourceURL:    feedtest.Ptr("https://www.cve.org/CVERecord?id=" + id),
			Source:       source,
			License:      "CVE Terms of Use",
		}}
		if rng != "" {
			a.AffectedRange = feedtest.Ptr(rng)
		}
		return a
	}
}

func withAdvisory(a cve.ProductAtom, id string) cve.ProductAtom {
	a.AdvisoryID = feedtest.Ptr(id)
	return a
}

func TestParseRecords(t *testing.T) {
	log4j := atomMaker("CVE-2021-44228", "CVE List (CNA: apache)")
	panos := atomMaker("CVE-2024-0012", "CVE List (CNA: palo_alto)")
	panos3400 := atomMaker("CVE-2024-3400", "CVE List (CNA: palo_alto)")
	cpython := atomMaker("CVE-2024-11168", "CVE List (CNA: PSF)")
	apple := atomMaker("CVE-2023-41064", "CVE List (CNA: apple)")
	windows := atomMaker("CVE-2024-38063", "CVE List (CNA: microsoft)")
	linux := atomMaker("CVE-2025-21631", "CVE List (CNA: Linux)")
	redhat := atomMaker("CVE-2024-6387", "CVE List (CNA: redhat)")
	urllib3 := atomMaker("CVE-2023-45803", "CVE List (CNA: GitHub_M)")
	ontap := atomMaker("CVE-2023-27314", "CVE List (CNA: netapp)")
	libdwarf := atomMaker("CVE-2024-2002", "CVE List (CNA: redhat)")
	winrar := atomMaker("CVE-2023-38831", "CVE List (ADP: CISA-ADP)")
	fortinet := atomMaker("CVE-2024-21762", "CVE List (ADP: CISA-ADP)")
	curl := atomMaker("CVE-2023-38545", "CVE List (CNA: hackerone)")
	mozilla := atomMaker("CVE-2024-9680", "CVE List (CNA: mozilla)")
	glibc := atomMaker("CVE-2024-2961", "CVE List (CNA: glibc)")
	sevenZip := atomMaker("CVE-2024-11477", "CVE List (ADP: CISA-ADP)")
	const ontapFixes = "< 9.8P19, 9.9.1P16, 9.10.1P12, 9.11.1P8, 9.12.1P2, 9.13.1"

	tests := []struct {
		name      string
		file      string
		desc      string // prefix of the description
		published string
		modified  string
		metrics   []cve.Metric
		cwes      []string
		ref       cve.Reference // a reference that must be there with exactly these tags
		refs      int
		atoms     []cve.ProductAtom
		// atomCount, when set, is the number of atoms, and atoms is only
		// a subset of them.
		atomCount int
	}{
		{
			name:      "log4shell changes within a range",
			file:      "CVE-2021-44228.json",
			desc:      "Apache Log4j2 2.0-beta9 through 2.15.0 (excluding security releases 2.12.2, 2.12.3, and 2.3.1) JNDI features",
			published: "2021-12-10T00:00:00Z",
			modified:  "2025-02-04T14:25:37.215Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", Score: 10, Severity: "CRITICAL", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-502", "CWE-400", "CWE-20"},
			ref:  cve.Reference{URL: "https://tools.cisco.com/security/center/content/CiscoSecurityAdvisory/cisco-sa-apache-log4j-qRuKNEbd", Tags: []string{"vendor-advisory"}},
			refs: 51,
			atoms: []cve.ProductAtom{
				log4j("Vendor", "Apache Log4j2", "2.3.1", ">= 2.0-beta9, < 2.3.1"),
				log4j("Vendor", "Apache Log4j2", "2.12.2", ">= 2.4, < 2.12.2"),
				log4j("Vendor", "Apache Log4j2", "2.15.0", ">= 2.13.0, < 2.15.0"),
			},
		},
		{
			name:      "pan-os cvss 4.0 with two scenarios",
			file:      "CVE-2024-0012.json",
			desc:      "An authentication bypass in Palo Alto Networks PAN-OS software",
			published: "2024-11-18T15:47:41.407Z",
			modified:  "2024-11-29T16:08:34.490Z",
			metrics: []cve.Metric{
				{Version: "4.0", Vector: "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:L/SI:N/SA:N/AU:N/R:U/V:C/RE:H/U:Red", Score: 9.3, Severity: "CRITICAL", Source: "palo_alto", Type: "CNA"},
				{Version: "4.0", Vector: "CVSS:4.0/AV:N/AC:L/AT:P/PR:H/UI:N/VC:N/VI:H/VA:N/SC:N/SI:N/SA:N/AU:N/R:U/V:C/RE:H/U:Red", Score: 5.9, Severity: "MEDIUM", Source: "palo_alto", Type: "CNA"},
			},
			cwes: []string{"CWE-306"},
			ref:  cve.Reference{URL: "https://security.paloaltonetworks.com/CVE-2024-0012", Tags: []string{"vendor-advisory"}},
			refs: 3,
			atoms: []cve.ProductAtom{
				panos("Vendor", "Palo Alto Networks PAN-OS", "11.2.4-h1", ">= 11.2.0, < 11.2.4-h1"),
				panos("Vendor", "Palo Alto Networks PAN-OS", "11.1.5-h1", ">= 11.1.0, < 11.1.5-h1"),
				panos("Vendor", "Palo Alto Networks PAN-OS", "11.0.6-h1", ">= 11.0.0, < 11.0.6-h1"),
				panos("Vendor", "Palo Alto Networks PAN-OS", "10.2.12-h2", ">= 10.2.0, < 10.2.12-h2"),
			},
		},
		{
			name:      "pan-os release lines listed unaffected are not fixes",
			file:      "CVE-2024-3400.json",
			desc:      "A command injection as a result of arbitrary file creation vulnerability",
			published: "2024-04-12T07:20:00.707Z",
			modified:  "2024-08-01T20:12:06.667Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", Score: 10, Severity: "CRITICAL", Source: "palo_alto", Type: "CNA"},
			},
			cwes: []string{"CWE-77", "CWE-20"},
			ref:  cve.Reference{URL: "https://unit42.paloaltonetworks.com/cve-2024-3400/", Tags: []string{"technical-description"}},
			refs: 4,
			atoms: []cve.ProductAtom{
				panos3400("Vendor", "Palo Alto Networks PAN-OS", "10.2.9-h1", ">= 10.2.0, < 10.2.9-h1"),
				panos3400("Vendor", "Palo Alto Networks PAN-OS", "11.0.4-h1", ">= 11.0.0, < 11.0.4-h1"),
				panos3400("Vendor", "Palo Alto Networks PAN-OS", "11.1.2-h3", ">= 11.1.0, < 11.1.2-h3"),
			},
		},
		{
			name:      "cpython cvss 4.0 beside cisa-adp 3.1",
			file:      "CVE-2024-11168.json",
			desc:      "The urllib.parse.urlsplit() and urlparse() functions",
			published: "2024-11-12T21:22:23.438Z",
			modified:  "2025-01-06T17:59:48.232Z",
			metrics: []cve.Metric{
				{Version: "4.0", Vector: "CVSS:4.0/AV:N/AC:H/AT:P/PR:N/UI:N/VC:N/VI:L/VA:N/SC:N/SI:L/SA:N/AU:N", Score: 6.3, Severity: "MEDIUM", Source: "PSF", Type: "CNA"},
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:N/I:L/A:N", Score: 3.7, Severity: "LOW", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-918"},
			ref:  cve.Reference{URL: "https://github.com/python/cpython/issues/103848", Tags: []string{"issue-tracking"}},
			refs: 7,
			atoms: []cve.ProductAtom{
				cpython("Vendor", "CPython", "3.9.21", "< 3.9.21"),
				cpython("Vendor", "CPython", "3.10.16", ">= 3.10.0, < 3.10.16"),
				cpython("Vendor", "CPython", "3.11.4", ">= 3.11.0, < 3.11.4"),
				cpython("Vendor", "CPython", "3.12.0b1", ">= 3.12.0a1, < 3.12.0b1"),
			},
		},
		{
			name:      "git commit bounds give no atom",
			file:      "CVE-2024-10389.json",
			desc:      "There exists a Path Traversal vulnerability in Safearchive",
			published: "2024-11-04T10:47:39.434Z",
			modified:  "2024-11-21T16:25:29.258Z",
			metrics: []cve.Metric{
				{Version: "4.0", Vector: "CVSS:4.0/AV:L/AC:L/AT:P/PR:H/UI:P/VC:L/VI:H/VA:L/SC:L/SI:H/SA:L/AU:Y/R:U/V:D/RE:L/U:Green", Score: 5.9, Severity: "MEDIUM", Source: "Google", Type: "CNA"},
			},
			cwes: []string{"CWE-427"},
			refs: 1,
		},
		{
			name:      "apple products",
			file:      "CVE-2023-41064.json",
			desc:      "A buffer overflow issue was addressed with improved memory handling.",
			published: "2023-09-07T17:30:10.904Z",
			modified:  "2025-02-13T17:08:50.409Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:L/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:H", Score: 7.8, Severity: "HIGH", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-120"},
			refs: 6,
			atoms: []cve.ProductAtom{
				apple("Apple", "macOS", "12.6", "< 12.6"),
				apple("Apple", "macOS", "11.7", "< 11.7"),
				apple("Apple", "iOS and iPadOS", "16.6", "< 16.6"),
				apple("Apple", "iOS and iPadOS", "15.7", "< 15.7"),
				apple("Apple", "macOS", "13.5", "< 13.5"),
			},
		},
		{
			name:      "windows builds, en-US description",
			file:      "CVE-2024-38063.json",
			desc:      "Windows TCP/IP Remote Code Execution Vulnerability",
			published: "2024-08-13T17:29:58.392Z",
			modified:  "2025-01-23T01:24:59.135Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/E:U/RL:O/RC:C", Score: 9.8, Severity: "CRITICAL", Source: "microsoft", Type: "CNA"},
			},
			cwes: []string{"CWE-191"},
			ref:  cve.Reference{URL: "https://msrc.microsoft.com/update-guide/vulnerability/CVE-2024-38063", Tags: []string{"vendor-advisory"}},
			refs: 1,
			atoms: []cve.ProductAtom{
				windows("Windows", "Windows 10 Version 1809", "10.0.17763.6293", ">= 10.0.17763.0, < 10.0.17763.6293"),
				windows("Windows", "Windows 11 version 21H2", "10.0.22000.3197", ">= 10.0.0, < 10.0.22000.3197"),
				// Listed twice by the CNA, once with a double space.
				windows("Windows", "Windows Server 2008 Service Pack 2", "6.0.6003.22825", ">= 6.0.6003.0, < 6.0.6003.22825"),
				windows("Windows", "Windows 11 Version 24H2", "10.0.26100.1457", ">= 10.0.26100.0, < 10.0.26100.1457"),
			},
			atomCount: 24,
		},
		{
			name:      "linux stable series fixed by unaffected entries",
			file:      "CVE-2025-21631.json",
			desc:      "In the Linux kernel, the following vulnerability has been resolved:",
			published: "2025-01-19T10:17:49.439Z",
			modified:  "2025-05-04T13:05:59.494Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H", Score: 7.8, Severity: "HIGH", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-416"},
			refs: 5,
			atoms: []cve.ProductAtom{
				linux("Vendor", "Linux", "5.15.177", ">= 5.15, < 5.15.177"),
				linux("Vendor", "Linux", "6.1.125", ">= 6.1, < 6.1.125"),
				linux("Vendor", "Linux", "6.6.72", ">= 6.6, < 6.6.72"),
				linux("Vendor", "Linux", "6.12.10", ">= 6.12, < 6.12.10"),
				linux("Vendor", "Linux", "6.13", "< 6.13"),
			},
		},
		{
			name:      "red hat rpm builds unaffected from a version on",
			file:      "CVE-2024-6387.json",
			desc:      "A security regression (CVE-2006-5051) was discovered in OpenSSH's server (sshd).",
			published: "2024-07-01T12:37:25.431Z",
			modified:  "2024-11-24T17:19:20.471Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:H/I:H/A:H", Score: 8.1, Severity: "HIGH", Source: "redhat", Type: "CNA"},
			},
			cwes: []string{"CWE-364"},
			ref:  cve.Reference{URL: "https://access.redhat.com/errata/RHSA-2024:4312", Tags: []string{"vendor-advisory", "x_refsource_REDHAT"}},
			refs: 77,
			atoms: []cve.ProductAtom{
				redhat("Vendor", "Red Hat Enterprise Linux 9 (openssh)", "0:8.7p1-38.el9_4.1", "< 0:8.7p1-38.el9_4.1"),
				redhat("Vendor", "Red Hat Enterprise Linux 9.0 Update Services for SAP Solutions (openssh)", "0:8.7p1-12.el9_0.1", "< 0:8.7p1-12.el9_0.1"),
				redhat("Vendor", "Red Hat Enterprise Linux 9.2 Extended Update Support (openssh)", "0:8.7p1-30.el9_2.4", "< 0:8.7p1-30.el9_2.4"),
				redhat("Vendor", "Red Hat OpenShift Container Platform 4.13 (rhcos)", "413.92.202407091321-0", "< 413.92.202407091321-0"),
				redhat("Vendor", "Red Hat OpenShift Container Platform 4.14 (rhcos)", "414.92.202407091253-0", "< 414.92.202407091253-0"),
				redhat("Vendor", "Red Hat OpenShift Container Platform 4.15 (rhcos)", "415.92.202407091355-0", "< 415.92.202407091355-0"),
				redhat("Vendor", "Red Hat OpenShift Container Platform 4.16 (rhcos)", "416.94.202407081958-0", "< 416.94.202407081958-0"),
			},
		},
		{
			name:      "github range text and repository advisory",
			file:      "CVE-2023-45803.json",
			desc:      "urllib3 is a user-friendly HTTP client library for Python.",
			published: "2023-10-17T19:43:45.404Z",
			modified:  "2025-02-13T17:14:11.578Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:A/AC:H/PR:H/UI:N/S:U/C:H/I:N/A:N", Score: 4.2, Severity: "MEDIUM", Source: "GitHub_M", Type: "CNA"},
			},
			cwes: []string{"CWE-200"},
			ref:  cve.Reference{URL: "https://github.com/urllib3/urllib3/security/advisories/GHSA-g4mx-q9vg-27p4", Tags: []string{"x_refsource_CONFIRM"}},
			refs: 6,
			atoms: []cve.ProductAtom{
				withAdvisory(urllib3("Vendor", "urllib3", "2.0.7", ">= 2.0.0, < 2.0.7"), "GHSA-g4mx-q9vg-27p4"),
				withAdvisory(urllib3("Vendor", "urllib3", "1.26.18", "< 1.26.18"), "GHSA-g4mx-q9vg-27p4"),
			},
		},
		{
			name:      "netapp lists one fix per release line",
			file:      "CVE-2023-27314.json",
			desc:      "ONTAP 9 versions prior to 9.8P19, 9.9.1P16, 9.10.1P12, 9.11.1P8, \n9.12.1P2 and 9.13.1",
			published: "2023-10-12T18:26:47.593Z",
			modified:  "2024-09-18T15:02:57.897Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H", Score: 7.5, Severity: "HIGH", Source: "netapp", Type: "CNA"},
			},
			cwes: []string{"CWE-400"},
			refs: 1,
			atoms: []cve.ProductAtom{
				ontap("Vendor", "NetApp ONTAP 9", "9.8P19", ontapFixes),
				ontap("Vendor", "NetApp ONTAP 9", "9.9.1P16", ontapFixes),
				ontap("Vendor", "NetApp ONTAP 9", "9.10.1P12", ontapFixes),
				ontap("Vendor", "NetApp ONTAP 9", "9.11.1P8", ontapFixes),
				ontap("Vendor", "NetApp ONTAP 9", "9.12.1P2", ontapFixes),
				ontap("Vendor", "NetApp ONTAP 9", "9.13.1", ontapFixes),
			},
		},
		{
			name:      "unaffected version above an affected one, dataVersion 5.2",
			file:      "CVE-2024-2002.json",
			desc:      "A double-free vulnerability was found in libdwarf.",
			published: "2024-03-18T12:26:31.386Z",
			modified:  "2025-11-20T18:21:28.745Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H", Score: 7.5, Severity: "HIGH", Source: "redhat", Type: "CNA"},
			},
			cwes: []string{"CWE-415"},
			refs: 4,
			atoms: []cve.ProductAtom{
				libdwarf("Vendor", "libdwarf", "0.9.2", ">= 0.1.0, < 0.9.2"),
			},
		},
		{
			name:      "cna without versions, cisa-adp cpe entry, desktop",
			file:      "CVE-2023-38831.json",
			desc:      "RARLAB WinRAR before 6.23 allows attackers to execute arbitrary code",
			published: "2023-08-23T00:00:00Z",
			modified:  "2024-12-18T17:48:09.676Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:L/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:H", Score: 7.8, Severity: "HIGH", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-351"},
			refs: 5,
			atoms: []cve.ProductAtom{
				winrar("Desktop", "rarlab:winrar", "6.23", "< 6.23"),
			},
		},
		{
			name:      "cna with last affected versions only, cisa-adp fixes",
			file:      "CVE-2024-21762.json",
			desc:      "A out-of-bounds write in Fortinet FortiOS versions",
			published: "2024-02-09T08:14:25.954Z",
			modified:  "2024-08-01T22:27:36.250Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/E:H/RL:W/RC:C", Score: 9.6, Severity: "CRITICAL", Source: "fortinet", Type: "CNA"},
			},
			cwes: []string{"CWE-787"},
			refs: 1,
			atoms: []cve.ProductAtom{
				fortinet("Vendor", "fortinet:fortiproxy", "2.0.14", ">= 1.0.0, < 2.0.14"),
				fortinet("Vendor", "fortinet:fortios", "7.4.3", ">= 7.4.0, < 7.4.3"),
			},
			atomCount: 9,
		},
		{
			name:      "legacy record, timestamp without timezone, nothing scored",
			file:      "CVE-2021-28429.json",
			desc:      "Integer overflow vulnerability in av_timecode_make_string in libavutil/timecode.c in FFmpeg version 4.3.2",
			published: "2023-08-11T00:00:00Z",
			modified:  "2024-10-09T17:36:02.229Z",
			refs:      1,
		},
		{
			name:      "curl writes version equal to lessThan",
			file:      "CVE-2023-38545.json",
			desc:      "This flaw makes curl overflow a heap based buffer in the SOCKS5 proxy\nhandshake.",
			published: "2023-10-18T03:52:00.816Z",
			modified:  "2024-10-17T21:16:30.994Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:H", Score: 8.8, Severity: "HIGH", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-787"},
			refs: 16,
			atoms: []cve.ProductAtom{
				curl("Vendor", "curl", "8.4.0", "< 8.4.0"),
			},
		},
		{
			name:      "last affected versions only, cwe from the description text",
			file:      "CVE-2024-7264.json",
			desc:      "libcurl's ASN1 parser code has the `GTime2str()` function",
			published: "2024-07-31T08:08:14.585Z",
			modified:  "2025-11-03T22:32:51.400Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:L/I:L/A:L", Score: 6.3, Severity: "MEDIUM", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-125"},
			refs: 8,
		},
		{
			name:      "mozilla desktop applications",
			file:      "CVE-2024-9680.json",
			desc:      "An attacker was able to achieve code execution in the content process",
			published: "2024-10-09T12:59:07.108Z",
			modified:  "2024-11-18T18:21:58.377Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", Score: 9.8, Severity: "CRITICAL", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-416"},
			refs: 6,
			atoms: []cve.ProductAtom{
				mozilla("Desktop", "Mozilla Firefox", "131.0.2", "< 131.0.2"),
				mozilla("Desktop", "Mozilla Firefox ESR", "128.3.1", "< 128.3.1"),
				mozilla("Desktop", "Mozilla Firefox ESR", "115.16.1", "< 115.16.1"),
				mozilla("Desktop", "Mozilla Thunderbird", "131.0.1", "< 131.0.1"),
				mozilla("Desktop", "Mozilla Thunderbird", "128.3.1", "< 128.3.1"),
				mozilla("Desktop", "Mozilla Thunderbird", "115.16.0", "< 115.16.0"),
			},
		},
		{
			name:      "vendor prefix without a leading The",
			file:      "CVE-2024-2961.json",
			desc:      "The iconv() function in the GNU C Library versions 2.39 and older",
			published: "2024-04-17T17:27:40.541Z",
			modified:  "2024-11-15T15:22:29.055Z",
			metrics: []cve.Metric{
				{Version: "3.1", Vector: "CVSS:3.1/AV:L/AC:L/PR:N/UI:N/S:U/C:L/I:L/A:H", Score: 7.3, Severity: "HIGH", Source: "CISA-ADP", Type: "ADP"},
			},
			cwes: []string{"CWE-787"},
			refs: 19,
			atoms: []cve.ProductAtom{
				glibc("Vendor", "GNU C Library glibc", "2.40", ">= 2.1.93, < 2.40"),
			},
		},
		{
			name:      "cvss 3.0 from the cna, fix from cisa-adp",
			file:      "CVE-2024-11477.json",
			desc:      "7-Zip Zstandard Decompression Integer Underflow Remote Code Execution Vulnerability.",
			published: "2024-11-22T20:22:33.278Z",
			modified:  "2024-12-02T14:09:05.550Z",
			metrics: []cve.Metric{
				{Version: "3.0", Vector: "CVSS:3.0/AV:L/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:H", Score: 7.8, Severity: "HIGH", Source: "zdi", Type: "CNA"},
			},
			cwes: []string{"CWE-191"},
			refs: 1,
			atoms: []cve.ProductAtom{
				sevenZip("Desktop", "7-zip:7zip", "24.07", ">= 24.06, < 24.07"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := parseFile(t, tt.file)
			id := strings.TrimSuffix(tt.file, ".json")
			if f.CVEID != id || f.Feed != "cvelist" || f.State != cve.StatePublished || f.RejectedReason != "" {
				t.Errorf("id, feed, state = %q, %q, %q (%q); want %q, cvelist, PUBLISHED", f.CVEID, f.Feed, f.State, f.RejectedReason, id)
			}
			wantSource := cve.DataSource{Name: "cvelist", License: "CVE Terms of Use", URL: feedtest.Ptr("https://www.cve.org/CVERecord?id=" + id)}
			feedtest.CheckPublished(t, f, feedtest.Published{
				Source: wantSource, Desc: tt.desc, Published: tt.published, Modified: tt.modified,
				Metrics: tt.metrics, CWEs: tt.cwes, Ref: tt.ref, Refs: tt.refs,
			})
			if tt.atomCount == 0 {
				if diff := cmp.Diff(tt.atoms, f.Atoms); diff != "" {
					t.Errorf("atoms (-want +got):\n%s", diff)
				}
				return
			}
			if len(f.Atoms) != tt.atomCount {
				t.Errorf("%d atoms, want %d", len(f.Atoms), tt.atomCount)
			}
			for _, want := range tt.atoms {
				found := false
				for _, got := range f.Atoms {
					if cmp.Equal(want, got) {
						found = true
					}
				}
				if !found {
					t.Errorf("no atom %+v among %d", want, len(f.Atoms))
				}
			}
		})
	}
}

func TestParseRejected(t *testing.T) {
	tests := []struct {
		name string
		file string
		want *cve.Facts
	}{
		{
			name: "rejected by its cna",
			file: "CVE-2019-25161.json",
			want: &cve.Facts{
				CVEID:          "CVE-2019-25161",
				Feed:           "cvelist",
				Source:         cve.DataSource{Name: "cvelist", License: "CVE Terms of Use", URL: feedtest.Ptr("https://www.cve.org/CVERecord?id=CVE-2019-25161")},
				State:          cve.StateRejected,
				RejectedReason: "This CVE ID has been rejected or withdrawn by its CVE Numbering Authority.",
				Published:      feedtest.Time("2024-02-26T17:20:20.190Z"),
				Modified:       feedtest.Time("2024-02-27T09:57:13.593Z"),
			},
		},
		{
			name: "legacy record without timezone or publication date",
			file: "CVE-2021-36593.json",
			want: &cve.Facts{
				CVEID:          "CVE-2021-36593",
				Feed:           "cvelist",
				Source:         cve.DataSource{Name: "cvelist", License: "CVE Terms of Use", URL: feedtest.Ptr("https://www.cve.org/CVERecord?id=CVE-2021-36593")},
				State:          cve.StateRejected,
				RejectedReason: "DO NOT USE THIS CANDIDATE NUMBER. ConsultIDs: none. Reason: This candidate was withdrawn by its CNA. Further investigation showed that it was not a security issue. Notes: none.",
				Modified:       feedtest.Time("2024-05-02T21:17:22.890858Z"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseFile(t, tt.file)); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSampleFiles parses every sample record: each gives one Facts for the
// CVE of its file name, with a canonical id and UTC times.
func TestSampleFiles(t *testing.T) {
	files := feedtest.SampleGlob(t, path.Join(dataDir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no sample files")
	}
	states := map[string]int{}
	withAtoms := 0
	for _, p := range files {
		file := path.Base(p)
		f := parseFile(t, file)
		if want := strings.TrimSuffix(file, ".json"); f.CVEID != want {
			t.Errorf("%s: id %q", file, f.CVEID)
		}
		if f.Modified == nil || f.Modified.Location() != time.UTC {
			t.Errorf("%s: modified %v, want a UTC time", file, f.Modified)
		}
		if f.State == cve.StatePublished && f.Description == "" {
			t.Errorf("%s: published record without a description", file)
		}
		for _, m := range f.Metrics {
			if m.Severity == "" || m.Source == "" || m.Vector == "" {
				t.Errorf("%s: incomplete metric %+v", file, m)
			}
		}
		for _, a := range f.Atoms {
			if !isVersion(a.FixedVersion) || a.Product == "" || a.Ecosystem == "" || a.AffectedRange == nil {
				t.Errorf("%s: bad atom %+v", file, a)
			}
		}
		states[f.State]++
		if len(f.Atoms) > 0 {
			withAtoms++
		}
	}
	if states[cve.StateRejected] != 2 || states[cve.StatePublished] != len(files)-2 {
		t.Errorf("states %v, want 2 rejected and the rest published", states)
	}
	t.Logf("%d records, %d with atoms", len(files), withAtoms)
}

func TestParseMalformed(t *testing.T) {
	good := string(readFile(t, "CVE-2019-25161.json"))
	tests := []struct {
		name  string
		input string
	}{
		{"empty", ""},
		{"not json", "CVE-2021-44228"},
		{"truncated", good[:len(good)/2]},
		{"array", "[" + good + "]"},
		{"two records", good + good},
		{"no metadata", `{"dataType":"CVE_RECORD","dataVersion":"5.1"}`},
		{"old format", `{"data_type":"CVE","data_format":"MITRE","data_version":"4.0","CVE_data_meta":{"ID":"CVE-2021-44228"}}`},
		{"version 4", `{"dataType":"CVE_RECORD","dataVersion":"4.0","cveMetadata":{"cveId":"CVE-2021-44228","state":"PUBLISHED"}}`},
		{"other data type", `{"dataType":"OSV","cveMetadata":{"cveId":"CVE-2021-44228","state":"PUBLISHED"}}`},
		{"bad id", `{"dataType":"CVE_RECORD","dataVersion":"5.1","cveMetadata":{"cveId":"CVE-21-1","state":"PUBLISHED"}}`},
		{"reserved state", `{"dataType":"CVE_RECORD","dataVersion":"5.1","cveMetadata":{"cveId":"CVE-2021-44228","state":"RESERVED"}}`},
		{"bad date", `{"dataType":"CVE_RECORD","dataVersion":"5.1","cveMetadata":{"cveId":"CVE-2021-44228","state":"PUBLISHED","dateUpdated":"yesterday"}}`},
		{"score of the wrong type", `{"dataType":"CVE_RECORD","dataVersion":"5.1","cveMetadata":{"cveId":"CVE-2021-44228","state":"PUBLISHED"},"containers":{"cna":{"metrics":[{"cvssV3_1":{"baseScore":"high"}}]}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec feedtest.Recorder
			err := Parser.Parse(context.Background(), "x.json", strings.NewReader(tt.input), &rec)
			if err == nil {
				t.Fatalf("parse succeeded with %d facts, want an error", len(rec.Received))
			}
			if !strings.HasPrefix(err.Error(), "cvelist x.json: ") {
				t.Errorf("error %q does not name the file", err)
			}
			if len(rec.Received) != 0 {
				t.Errorf("%d facts from a malformed file", len(rec.Received))
			}
		})
	}
}

func TestParseSinkError(t *testing.T) {
	feedtest.CheckSinkError(t, Parser, "CVE-2021-44228.json", readFile(t, "CVE-2021-44228.json"), 1)
}

func TestParseCanceled(t *testing.T) {
	feedtest.CheckCanceled(t, Parser, "CVE-2021-44228.json", readFile(t, "CVE-2021-44228.json"))
}

func TestSkipsDeltaFiles(t *testing.T) {
	for _, name := range []string{"cves/delta.json", "deltaLog.json"} {
		var rec feedtest.Recorder
		if err := Parser.Parse(context.Background(), name, strings.NewReader(`{"fetchTime":"2025-01-01T00:00:00Z","new":[]}`), &rec); err != nil || len(rec.Received)+len(rec.Messages()) != 0 {
			t.Errorf("%s: error %v, %d facts, %d rejects; want it passed over", name, err, len(rec.Received), len(rec.Messages()))
		}
	}
}

// recordWith builds a minimal published record around a CNA container.
func recordWith(cna string) string {
	return `{"dataType":"CVE_RECORD","dataVersion":"5.1",
		"cveMetadata":{"cveId":"cve-2099-1234","state":"PUBLISHED","assignerShortName":"example","datePublished":"2099-01-02T03:04:05","dateUpdated":"2099-01-03T00:00:00+02:00"},
		"containers":{"cna":` + cna + `}}`
}

func parseString(t *testing.T, doc string) *cve.Facts {
	t.Helper()
	rec := feedtest.Parse(t, Parser, "x.json", []byte(doc))
	if len(rec.Received) != 1 {
		t.Fatalf("%d facts, want 1", len(rec.Received))
	}
	return rec.Received[0]
}

// TestMetricsAndText covers what no sample record shows: CVSS 2.0,
// severities left out or written in lower case, descriptions in several
// languages, the assigner's name when the CNA has no provider name.
func TestMetricsAndText(t *testing.T) {
	f := parseString(t, recordWith(`{
		"descriptions":[{"lang":"es","value":"Descripción"},{"lang":"en-GB","value":"British"},{"lang":"en","value":" English "}],
		"metrics":[
			{"cvssV2_0":{"version":"2.0","vectorString":"AV:N/AC:L/Au:N/C:P/I:P/A:P","baseScore":7.5}},
			{"cvssV3_0":{"vectorString":"CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N","baseScore":0}},
			{"cvssV3_1":{"vectorString":"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H","baseScore":9.8,"baseSeverity":"critical"}},
			{"cvssV3_1":{"vectorString":"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H","baseScore":9.8,"baseSeverity":"CRITICAL"}},
			{"cvssV4_0":{"vectorString":"CVSS:4.0/AV:N","baseScore":11}},
			{"cvssV3_1":{"vectorString":"CVSS:3.1/AV:N"}},
			{"other":{"type":"ssvc","content":{}}}
		],
		"problemTypes":[{"descriptions":[{"cweId":"cwe-79","type":"CWE"},{"cweId":"CWE-79"},{"type":"text","description":"n/a"},{"cweId":"NVD-CWE-noinfo"}]}],
		"references":[{"url":"https://example.com/a","tags":["patch"]},{"url":"https://example.com/a","tags":["patch","x_transferred","exploit"]},{"url":" "}]
	}`))
	want := []cve.Metric{
		{Version: "2.0", Vector: "AV:N/AC:L/Au:N/C:P/I:P/A:P", Score: 7.5, Severity: "HIGH", Source: "example", Type: "CNA"},
		{Version: "3.0", Vector: "CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N", Score: 0, Severity: "NONE", Source: "example", Type: "CNA"},
		{Version: "3.1", Vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", Score: 9.8, Severity: "CRITICAL", Source: "example", Type: "CNA"},
	}
	if diff := cmp.Diff(want, f.Metrics); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if f.CVEID != "CVE-2099-1234" {
		t.Errorf("id %q, want the canonical form", f.CVEID)
	}
	if f.Description != "English" {
		t.Errorf("description %q, want the en one", f.Description)
	}
	if diff := cmp.Diff([]string{"CWE-79"}, f.CWEs); diff != "" {
		t.Errorf("cwes (-want +got):\n%s", diff)
	}
	wantRefs := []cve.Reference{{URL: "https://example.com/a", Tags: []string{"patch", "exploit"}}}
	if diff := cmp.Diff(wantRefs, f.References); diff != "" {
		t.Errorf("references (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(feedtest.Time("2099-01-02T03:04:05Z"), f.Published); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(feedtest.Time("2099-01-02T22:00:00Z"), f.Modified); diff != "" {
		t.Errorf("modified (-want +got):\n%s", diff)
	}
}

func TestAtomRules(t *testing.T) {
	mk := atomMaker("CVE-2099-1234", "CVE List (CNA: example)")
	tests := []struct {
		name     string
		affected string
		want     []cve.ProductAtom
	}{
		{
			name:     "placeholders give nothing",
			affected: `{"vendor":"n/a","product":"n/a","versions":[{"version":"n/a","status":"affected"},{"version":"0","lessThan":"unspecified","status":"affected"},{"version":"1.0","lessThan":"*","status":"affected"},{"version":"1.0","lessThan":"0","status":"affected"}]}`,
		},
		{
			name:     "a product is needed",
			affected: `{"vendor":"Acme","product":"n/a","versions":[{"version":"0","lessThan":"2.0","status":"affected"}]}`,
		},
		{
			name:     "package name stands in for the product",
			affected: `{"packageName":"left-pad","versions":[{"version":"0","lessThan":"1.3.0","status":"affected","versionType":"semver"}]}`,
			want:     []cve.ProductAtom{mk("Vendor", "left-pad", "1.3.0", "< 1.3.0")},
		},
		{
			name:     "abbreviated commit hash with a product version in changes",
			affected: `{"vendor":"Acme","product":"Acme Tool","versions":[{"version":"0","lessThan":"deadbee","status":"affected","versionType":"git","changes":[{"at":"4.2.1","status":"unaffected"}]}]}`,
			want:     []cve.ProductAtom{mk("Vendor", "Acme Tool", "4.2.1", "< 4.2.1")},
		},
		{
			name:     "an unaffected range with changes back to affected",
			affected: `{"vendor":"Acme","product":"Tool","versions":[{"version":"1.0","status":"unaffected","lessThan":"3.0","changes":[{"at":"1.5","status":"affected"},{"at":"1.7","status":"unaffected"}]}]}`,
			want:     []cve.ProductAtom{mk("Vendor", "Acme Tool", "1.7", ">= 1.5, < 1.7")},
		},
		{
			name:     "still affected after the last change, fixed at lessThan",
			affected: `{"vendor":"Acme","product":"Tool","versions":[{"version":"1.0","status":"affected","lessThan":"2.0","changes":[{"at":"1.2","status":"unaffected"},{"at":"1.5","status":"affected"}]}]}`,
			want: []cve.ProductAtom{
				mk("Vendor", "Acme Tool", "1.2", ">= 1.0, < 1.2"),
				mk("Vendor", "Acme Tool", "2.0", ">= 1.5, < 2.0"),
			},
		},
		{
			name:     "unaffected below a bound is not a fix",
			affected: `{"vendor":"Acme","product":"Tool","defaultStatus":"affected","versions":[{"version":"0","lessThan":"1.0","status":"unaffected"},{"version":"1.1","lessThan":"1.4","status":"unaffected"}]}`,
		},
		{
			name:     "unaffected with nothing affected below",
			affected: `{"vendor":"Acme","product":"Tool","defaultStatus":"unaffected","versions":[{"version":"3.0","status":"unaffected"},{"version":"4.0","status":"affected"}]}`,
		},
		{
			name:     "range text with a last affected version",
			affected: `{"vendor":"Acme","product":"Tool","versions":[{"version":"<= 2.0.1","status":"affected"},{"version":"> 1.0, < 1.4","status":"affected"},{"version":"< later","status":"affected"}]}`,
			want:     []cve.ProductAtom{mk("Vendor", "Acme Tool", "1.4", "> 1.0, < 1.4")},
		},
		{
			name:     "microsoft non-windows product",
			affected: `{"vendor":"Microsoft","product":".NET 8.0","versions":[{"version":"8.0.0","lessThan":"8.0.7","status":"affected","versionType":"semver"}]}`,
			want:     []cve.ProductAtom{mk("Microsoft", "Microsoft .NET 8.0", "8.0.7", ">= 8.0.0, < 8.0.7")},
		},
		{
			name:     "same fix twice is one atom",
			affected: `{"vendor":"Acme","product":"Tool","versions":[{"version":"0","lessThan":"2.0","status":"affected"},{"version":"1.0","lessThan":"2.0","status":"affected"}]}`,
			want:     []cve.ProductAtom{mk("Vendor", "Acme Tool", "2.0", "< 2.0")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := parseString(t, recordWith(`{"providerMetadata":{"shortName":"example"},"descriptions":[{"lang":"en","value":"x"}],"affected":[`+tt.affected+`]}`))
			if diff := cmp.Diff(tt.want, f.Atoms); diff != "" {
				t.Errorf("atoms (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0},
		{"0.1.0", "0.9.2", -1},
		{"10.1.0", "10.2.0", -1},
		{"10.10", "10.9", 1},
		{"1.0", "1.0.1", -1},
		{"5.15", "5.15.177", -1},
		{"007", "7", 0},
		{"1.0a", "1.0", 1},
	}
	for _, tt := range tests {
		if got := compareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := compareVersions(tt.b, tt.a); got != -tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestIsVersion(t *testing.T) {
	for s, want := range map[string]bool{
		"2.15.0": true, "11.2.4-h1": true, "0:8.7p1-38.el9_4.1": true, "9.8P19": true, "24.07": true,
		"0": false, "": false, "unspecified": false, "*": false, "log4j-core*": false, "5.15.*": false,
		"11 and 12": false, "f7ce9d7b6f9c6ecd72d0b0f16216b046e55e44dc": false, "deadbee": false, "1234567": true,
		"< 2.0": false, "n/a": false, "All": false,
	} {
		if got := isVersion(s); got != want {
			t.Errorf("isVersion(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, file := range []string{"CVE-2021-44228.json", "CVE-2024-0012.json", "CVE-2021-36593.json", "CVE-2025-21631.json", "CVE-2023-45803.json", "CVE-2024-6387.json"} {
		f.Add(readFile(f, file))
	}
	f.Add([]byte(`{"cveMetadata":{"cveId":"CVE-2021-0001","state":"PUBLISHED"}}`))
	feedtest.Fuzz(f, Parser, "fuzz.json", func(t *testing.T, rec *feedtest.Recorder, err error) {
		if err != nil && len(rec.Received) != 0 {
			t.Fatalf("error %v after %d facts", err, len(rec.Received))
		}
	})
}
