package exposure

import (
	"strings"
	"unicode"
)

// The keys under which inventory items find the catalog's products: the
// names of each ecosystem folded as its products are named.

// Key returns the key under which an inventory item of ecosystem named
// name finds the catalog's products: the ecosystem as given, and the name
// folded as the ecosystem's products are named.
//
//   - Windows and Microsoft: case folded, the architecture suffix of
//     MSRC's product names (" for x64-based Systems") left out, so that
//     "Windows 11 Version 23H2" finds "Windows 11 Version 23H2 for
//     x64-based Systems".
//   - Desktop and Vendor: letters and digits only, case folded: "7-Zip"
//     finds "7zip" and "Google Chrome" finds "googlechrome".
//   - PyPI: normalized as PEP 503 says, runs of "-", "_" and "." as one
//     "-", case folded: "Django_Rest.Framework" finds
//     "django-rest-framework".
//   - Every other ecosystem (distributions, language packages): case
//     folded.
func Key(ecosystem, name string) string {
	switch ecosystem {
	case "PyPI":
		return ecosystem + "\x00" + pep503(name)
	case "Windows", "Microsoft":
		p, _ := windowsProduct(name)
		return ecosystem + "\x00" + strings.ToLower(p)
	case "Desktop", "Vendor":
		return ecosystem + "\x00" + alnum(name)
	}
	return ecosystem + "\x00" + strings.ToLower(name)
}

// productKeys returns the keys of a catalog product: its Key, and for a
// CPE-style "vendor:product" name of the Desktop and Vendor ecosystems
// also the keys of "product" and of "vendor product", as applications
// report their names ("WinRAR" for rarlab:winrar, "Google Chrome" for
// google:chrome).
func productKeys(ecosystem, product string) []string {
	keys := []string{Key(ecosystem, product)}
	if ecosystem == "Desktop" || ecosystem == "Vendor" {
		if vendor, name, ok := strings.Cut(product, ":"); ok && name != "" {
			for _, k := range []string{Key(ecosystem, name), Key(ecosystem, vendor+" "+name)} {
				if !containsString(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// pep503 returns the normalized name of a Python package.
func pep503(name string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(name) {
		if r == '-' || r == '_' || r == '.' {
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		b.WriteRune(r)
	}
	return b.String()
}

func alnum(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// windowsArch maps the architecture suffixes of MSRC product names to the
// architectures agents report.
var windowsArch = []struct{ suffix, arch string }{
	{" for x64-based systems", "x64"},
	{" for arm64-based systems", "arm64"},
	{" for 32-bit systems", "x86"},
	{" for 64-bit systems", "x64"}, // Office and Microsoft 365 Apps
	{" for 32-bit editions", "x86"},
	{" for 64-bit editions", "x64"},
}

// windowsProduct splits an MSRC product name into the product and the
// architecture its suffix names ("" for none).
func windowsProduct(name string) (product, arch string) {
	lower := strings.ToLower(name)
	for _, w := range windowsArch {
		if strings.HasSuffix(lower, w.suffix) {
			return name[:len(name)-len(w.suffix)], w.arch
		}
	}
	return name, ""
}

// normArch maps an agent's architecture to windowsArch's names.
func normArch(a string) string {
	switch strings.ToLower(a) {
	case "x64", "amd64", "x86_64", "x86-64":
		return "x64"
	case "arm64", "aarch64":
		return "arm64"
	case "x86", "386", "i386", "i686", "32-bit":
		return "x86"
	}
	return ""
}
