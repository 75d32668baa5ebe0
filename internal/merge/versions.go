package merge

import "github.com/patchline/patchline/internal/version"

// validVersion reports whether v parses under the ecosystem's rules.
func validVersion(ecosystem, v string) bool { return version.Valid(ecosystem, v) }

// compareVersions orders two fixed versions of one ecosystem.
func compareVersions(ecosystem, a, b string) int { return version.Order(ecosystem, a, b) }
