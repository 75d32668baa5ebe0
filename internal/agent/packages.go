package agent

import (
	"bufio"
	"bytes"
	"io"
	"regexp"
	"strings"

	"github.com/patchline/patchline/internal/agentproto"
)

// ParseOSRelease parses an os-release file (os-release(5)): KEY=value
// lines, values optionally quoted.
func ParseOSRelease(r io.Reader) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
			v = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`").Replace(v)
		}
		out[k] = v
	}
	return out
}

// Ecosystem returns the ecosystem of the distribution an os-release file
// describes, named as the CVE catalog (OSV) names them: "Debian:12",
// "Ubuntu:22.04:LTS", "Alpine:v3.19", "AlmaLinux:9", "Rocky Linux:9",
// "Red Hat:9"; otherwise NAME:VERSION_ID.
func Ecosystem(osr map[string]string) string {
	id, ver := osr["ID"], osr["VERSION_ID"]
	major, _, _ := strings.Cut(ver, ".")
	switch id {
	case "debian":
		if ver == "" {
			return "Debian" // testing and unstable have no VERSION_ID
		}
		return "Debian:" + major
	case "ubuntu":
		e := "Ubuntu:" + ver
		if strings.Contains(osr["VERSION"], "LTS") {
			e += ":LTS"
		}
		return e
	case "alpine":
		parts := strings.SplitN(ver, ".", 3)
		if len(parts) >= 2 {
			return "Alpine:v" + parts[0] + "." + parts[1]
		}
		return "Alpine:v" + ver
	case "almalinux":
		return "AlmaLinux:" + major
	case "rocky":
		return "Rocky Linux:" + major
	case "rhel":
		return "Red Hat:" + major
	}
	name := osr["NAME"]
	if name == "" {
		name = "Linux"
	}
	if ver == "" {
		return name
	}
	return name + ":" + ver
}

// ParseDpkgStatus reads dpkg's status database (/var/lib/dpkg/status) and
// returns the installed packages: those whose Status ends in "installed".
func ParseDpkgStatus(r io.Reader, ecosystem string) ([]agentproto.Software, error) {
	var out []agentproto.Software
	err := stanzas(r, func(f map[string]string) {
		st := strings.Fields(f["Status"])
		if len(st) != 3 || st[2] != "installed" || f["Package"] == "" {
			return
		}
		src, _, _ := strings.Cut(f["Source"], " ") // "openssl (3.0.11-1~deb12u2)" names a version too
		sw := agentproto.Software{Name: f["Package"], Version: f["Version"], Ecosystem: ecosystem, Arch: f["Architecture"]}
		if src != "" && src != sw.Name {
			sw.Source = src
		}
		out = append(out, sw)
	})
	return out, err
}

// ParseAPKInstalled reads apk's database (/lib/apk/db/installed):
// P: package, V: version, A: architecture, o: origin.
func ParseAPKInstalled(r io.Reader, ecosystem string) ([]agentproto.Software, error) {
	var out []agentproto.Software
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur agentproto.Software
	flush := func() {
		if cur.Name != "" {
			if cur.Source == cur.Name {
				cur.Source = ""
			}
			cur.Ecosystem = ecosystem
			out = append(out, cur)
		}
		cur = agentproto.Software{}
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		if len(line) < 2 || line[1] != ':' {
			continue
		}
		v := line[2:]
		switch line[0] {
		case 'P':
			cur.Name = v
		case 'V':
			cur.Version = v
		case 'A':
			cur.Arch = v
		case 'o':
			cur.Source = v
		}
	}
	flush()
	return out, sc.Err()
}

// RPMQueryFormat is the --queryformat of `rpm -qa` that ParseRPMQuery
// reads.
const RPMQueryFormat = `%{NAME}\t%{EPOCH}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\t%{SOURCERPM}\n`

// ParseRPMQuery reads the output of `rpm -qa --queryformat
// RPMQueryFormat`. Versions are [EPOCH:]VERSION-RELEASE, sources the name
// of the source RPM.
func ParseRPMQuery(out []byte, ecosystem string) []agentproto.Software {
	var pkgs []agentproto.Software
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 6 || f[0] == "" || f[0] == "gpg-pubkey" {
			continue
		}
		v := f[2] + "-" + f[3]
		if f[1] != "(none)" && f[1] != "" && f[1] != "0" {
			v = f[1] + ":" + v
		}
		sw := agentproto.Software{Name: f[0], Version: v, Ecosystem: ecosystem}
		if f[4] != "(none)" {
			sw.Arch = f[4]
		}
		if src := sourceRPMName(f[5]); src != "" && src != sw.Name {
			sw.Source = src
		}
		pkgs = append(pkgs, sw)
	}
	return pkgs
}

// sourceRPMName returns the name of a source RPM file name:
// "openssh-8.7p1-38.el9.src.rpm" is "openssh".
func sourceRPMName(file string) string {
	s, ok := strings.CutSuffix(file, ".src.rpm")
	if !ok {
		return ""
	}
	for i := 0; i < 2; i++ {
		j := strings.LastIndexByte(s, '-')
		if j <= 0 {
			return ""
		}
		s = s[:j]
	}
	return s
}

var aptInst = regexp.MustCompile(`^Inst (\S+) (?:\[(\S+)\] )?\((\S+) ([^\[]*?)\s*(?:\[(\S+)\])?\)`)

// ParseAptSimulate reads the output of `apt-get -s upgrade` (which needs
// no root) and returns the upgrades it would install: id the package,
// severity "security" for those from a security archive.
func ParseAptSimulate(out []byte) []agentproto.Update {
	var ups []agentproto.Update
	for _, line := range strings.Split(string(out), "\n") {
		m := aptInst.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		title := m[1] + " " + m[3]
		if m[2] != "" {
			title = m[1] + " " + m[2] + " → " + m[3]
		}
		u := agentproto.Update{ID: m[1], Title: title + " (" + m[4] + ")"}
		if strings.Contains(m[4], "-security") || strings.Contains(m[4], "Security") {
			u.Severity = "security"
		}
		ups = append(ups, u)
	}
	return ups
}

// ParseDNFCheckUpdate reads the output of `dnf -q check-update` (or yum's):
// lines of name.arch, version, repository.
func ParseDNFCheckUpdate(out []byte) []agentproto.Update {
	var ups []agentproto.Update
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || strings.HasSuffix(line, ":") || strings.HasPrefix(line, "Obsoleting") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '.'); i > 0 {
			name = name[:i]
		}
		u := agentproto.Update{ID: name, Title: name + " " + f[1] + " (" + f[2] + ")"}
		if strings.Contains(f[2], "security") {
			u.Severity = "security"
		}
		ups = append(ups, u)
	}
	return ups
}

// ParseAPKVersion reads the output of `apk version -l '<'`: lines of
// name-version, "<", available version.
func ParseAPKVersion(out []byte) []agentproto.Update {
	var ups []agentproto.Update
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "<" {
			continue
		}
		// name-version: the version starts after the last "-" that is
		// followed by a digit and ends before "-r<n>".
		nv := f[0]
		name := nv
		if i := strings.LastIndex(nv, "-r"); i > 0 {
			if j := strings.LastIndexByte(nv[:i], '-'); j > 0 {
				name = nv[:j]
			}
		}
		ups = append(ups, agentproto.Update{ID: name, Title: nv + " → " + f[2]})
	}
	return ups
}

// stanzas calls fn for each stanza of a deb822 file (dpkg's status):
// "Key: value" fields with continuation lines, stanzas separated by blank
// lines. Only the first line of a multi-line field is kept.
func stanzas(r io.Reader, fn func(map[string]string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	cur := map[string]string{}
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			if len(cur) > 0 {
				fn(cur)
				cur = map[string]string{}
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		cur[string(k)] = string(bytes.TrimSpace(v))
	}
	if len(cur) > 0 {
		fn(cur)
	}
	return sc.Err()
}
