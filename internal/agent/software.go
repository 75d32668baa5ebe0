package agent

import (
	"regexp"
	"strings"

	"github.com/patchline/patchline/internal/agentproto"
)

// Application returns the inventory item of a desktop application as an
// operating system lists it: a Windows "Programs and Features" entry
// (DisplayName, DisplayVersion, Publisher) or a macOS application bundle
// (its name and version). It is the one place where such names are
// normalised, for the real collectors and the simulator alike, so that
// exposure matches "Mozilla Firefox (x64 en-US)" 115.0 and a Mac's
// "Firefox" 115.0 against the catalog's Firefox fixes.
//
// The name loses what describes the build rather than the product: a
// trailing architecture, edition or locale in parentheses ("(x64 en-US)",
// "(64-bit)", "(x64 edition)"), a trailing " - en-us", the version itself
// and a trailing "release". Microsoft's Office and Microsoft 365 products
// are in the Microsoft ecosystem (the catalog's MSRC products); every
// other application is in Desktop.
func Application(displayName, version, publisher string) agentproto.Software {
	name := strings.Join(strings.Fields(displayName), " ")
	for {
		before := name
		name = trailingParens.ReplaceAllString(name, "")
		name = trailingLocale.ReplaceAllString(name, "")
		if version != "" {
			name = strings.TrimSuffix(name, " "+version)
		}
		name = trailingVersion.ReplaceAllString(name, "")
		name = strings.TrimSuffix(name, " release")
		name = strings.TrimRight(name, " -")
		if name == before || name == "" {
			break
		}
	}
	if name == "" {
		name = strings.TrimSpace(displayName)
	}
	sw := agentproto.Software{Name: name, Version: strings.TrimSpace(version), Ecosystem: "Desktop", Publisher: strings.TrimSpace(publisher)}
	if isMicrosoftOffice(name, publisher) {
		sw.Ecosystem = "Microsoft"
	}
	return sw
}

var (
	// trailingParens matches a parenthesised build description at the
	// end of a name: architectures, bitness, editions, locales, scopes.
	trailingParens = regexp.MustCompile(`(?i)\s*\((?:[^()]*\b(?:x64|x86|x86_64|amd64|arm64|aarch64|32-bit|64-bit|bit|edition|remove only|user|machine|[a-z]{2}-[a-z]{2,4})\b[^()]*)\)$`)
	// trailingLocale matches " - en-us" and the like.
	trailingLocale = regexp.MustCompile(`(?i)\s+-\s+[a-z]{2}(?:-[a-z]{2,4})?$`)
	// trailingVersion matches a dotted version at the end of a name.
	trailingVersion = regexp.MustCompile(`\s+v?\d+(?:\.\d+)+[a-z]?$`)
)

// isMicrosoftOffice reports whether an application is one of Microsoft's
// Office products, which MSRC names in the catalog's Microsoft ecosystem.
func isMicrosoftOffice(name, publisher string) bool {
	if publisher != "" && !strings.HasPrefix(strings.ToLower(publisher), "microsoft") {
		return false
	}
	lower := strings.ToLower(name)
	for _, p := range []string{"microsoft 365 apps", "microsoft office", "office 16 click-to-run", "microsoft word", "microsoft excel", "microsoft powerpoint", "microsoft outlook", "microsoft publisher", "microsoft access"} {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}
