package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/patchline/patchline/internal/agent"
	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// The profiles are built from real releases: Windows builds and the KBs
// that bring them (Microsoft's security update guide), macOS versions and
// builds, and Debian and Ubuntu package versions from their archives.
// Some of each are affected by CVEs of the bundled sample catalog, among
// them CVE-2024-38063 and CVE-2024-21412 (Windows builds below
// 10.0.19045.4780 and 10.0.22631.4037), CVE-2024-23222 (macOS before
// 14.3), CVE-2023-38831 (WinRAR before 6.23), CVE-2024-11477 (7-Zip
// 24.06), CVE-2024-4671 (Chrome before 124.0.6367.201), CVE-2024-9680
// (Firefox before 131.0.2), CVE-2025-53603 (sope before 5.8.0-1+deb12u1
// on Debian 12) and CVE-2024-6387 (openssh-server 1:9.2p1-2+deb12u2,
// fixed in 1:9.2p1-2+deb12u3).

// cumulative is a Windows cumulative update and the build it brings.
type cumulative struct {
	kb, build, month string
}

var win10CUs = []cumulative{
	{"KB5033372", "19045.3803", "2023-12"}, {"KB5034122", "19045.3930", "2024-01"},
	{"KB5034763", "19045.4046", "2024-02"}, {"KB5036892", "19045.4291", "2024-04"},
	{"KB5037768", "19045.4412", "2024-05"}, {"KB5039211", "19045.4529", "2024-06"},
	{"KB5040427", "19045.4651", "2024-07"}, {"KB5041580", "19045.4780", "2024-08"},
	{"KB5043064", "19045.4894", "2024-09"}, {"KB5044273", "19045.5011", "2024-10"},
	{"KB5046613", "19045.5131", "2024-11"}, {"KB5048652", "19045.5247", "2024-12"},
}

var win11CUs = []cumulative{
	{"KB5033375", "22631.2861", "2023-12"}, {"KB5034123", "22631.3007", "2024-01"},
	{"KB5034765", "22631.3155", "2024-02"}, {"KB5036893", "22631.3447", "2024-04"},
	{"KB5037771", "22631.3593", "2024-05"}, {"KB5039212", "22631.3737", "2024-06"},
	{"KB5040442", "22631.3880", "2024-07"}, {"KB5041585", "22631.4037", "2024-08"},
	{"KB5043076", "22631.4169", "2024-09"}, {"KB5044285", "22631.4317", "2024-10"},
	{"KB5046633", "22631.4460", "2024-11"}, {"KB5048685", "22631.4602", "2024-12"},
}

// win11_24H2 is the build a feature upgrade to Windows 11 24H2 lands on,
// with the cumulative update of December 2024.
var win11_24H2 = cumulative{"KB5048667", "26100.2605", "2024-12"}

func cuTitle(cu cumulative, product string) string {
	return fmt.Sprintf("%s Cumulative Update for %s for x64-based Systems (%s)", cu.month, product, cu.kb)
}

// app is an application and the versions it is found in. A desktop
// application is named as its operating system lists it (a Windows
// Programs and Features DisplayName, "%s" standing for the version, and
// its publisher; a macOS application's name) and reported through
// agent.Application, as the real agent reports it; an application with
// an ecosystem is reported as it is.
type app struct {
	name, ecosystem, publisher string
	versions                   []string
	// arch and channel are those of a Click-to-Run installation, which
	// the Windows agent reports on Microsoft 365 Apps.
	arch, channel string
}

var windowsApps = []app{
	{name: "Google Chrome", publisher: "Google LLC", versions: []string{"120.0.6099.130", "124.0.6367.119", "131.0.6778.140"}},
	{name: "Mozilla Firefox (x64 en-US)", publisher: "Mozilla", versions: []string{"121.0", "131.0", "133.0.3"}},
	{name: "Microsoft Edge", publisher: "Microsoft Corporation", versions: []string{"120.0.2210.91", "131.0.2903.112"}},
	{name: "7-Zip %s (x64)", publisher: "Igor Pavlov", versions: []string{"23.01", "24.06", "24.08"}},
	{name: "WinRAR %s (64-bit)", publisher: "win.rar GmbH", versions: []string{"6.22", "6.24", "7.01"}},
	{name: "PuTTY release %s (64-bit)", publisher: "Simon Tatham", versions: []string{"0.79", "0.81"}},
	{name: "Notepad++ (64-bit x64)", publisher: "Notepad++ Team", versions: []string{"8.5.8", "8.6.9"}},
	{name: "Zoom Workplace (64-bit)", publisher: "Zoom Video Communications, Inc.", versions: []string{"5.16.10", "6.2.11"}},
	{name: "Adobe Acrobat Reader DC", publisher: "Adobe Systems Incorporated", versions: []string{"23.008.20470", "24.004.20272"}},
	{name: "VLC media player", publisher: "VideoLAN", versions: []string{"3.0.20", "3.0.21"}},
	{name: "Microsoft 365 Apps for enterprise - en-us", publisher: "Microsoft Corporation", versions: []string{"16.0.17029.20108", "16.0.18129.20158"},
		arch: "x64", channel: "Current Channel"},
}

var macApps = []app{
	{name: "Google Chrome", versions: []string{"124.0.6367.119", "131.0.6778.140"}},
	{name: "Firefox", versions: []string{"131.0", "133.0.3"}},
	{name: "Slack", versions: []string{"4.36.140", "4.41.105"}},
	{name: "zoom.us", versions: []string{"5.17.11", "6.2.11"}},
	{name: "Microsoft Word", versions: []string{"16.80", "16.92"}},
	{name: "Visual Studio Code", versions: []string{"1.85.1", "1.96.2"}},
	{name: "Docker Desktop", versions: []string{"4.26.1", "4.37.1"}},
	{name: "iTerm2", versions: []string{"3.4.23", "3.5.10"}},
}

// pythonApps are PyPI packages of developers' machines.
var pythonApps = []app{
	{name: "requests", ecosystem: "PyPI", versions: []string{"2.31.0", "2.32.3"}},
	{name: "urllib3", ecosystem: "PyPI", versions: []string{"2.0.6", "2.2.3"}},
	{name: "Django", ecosystem: "PyPI", versions: []string{"4.2.7", "4.2.17"}},
	{name: "cryptography", ecosystem: "PyPI", versions: []string{"41.0.7", "44.0.0"}},
}

// macRelease is a macOS version and its build.
type macRelease struct {
	version, build, name string
}

var macReleases = []macRelease{
	{"13.4.1", "22F82", "Ventura"}, {"13.6.3", "22G436", "Ventura"},
	{"14.2.1", "23C71", "Sonoma"}, {"14.4.1", "23E224", "Sonoma"}, {"14.6.1", "23G93", "Sonoma"},
}

// macLatest is the last update of each major release.
var macLatest = map[string]macRelease{
	"13": {"13.7.2", "22H313", "Ventura"},
	"14": {"14.7.2", "23H311", "Sonoma"},
}

// macSequoia is where a feature upgrade of macOS 14 lands.
var macSequoia = macRelease{"15.2", "24C101", "Sequoia"}

// pkg is a distribution package: name, installed version, source
// package, and the version of the pending update ("" for none).
type pkg struct {
	name, version, source, update string
}

var debian12Base = []pkg{
	{"base-files", "12.4+deb12u5", "", "12.4+deb12u8"},
	{"bash", "5.2.15-2+b2", "", ""},
	{"coreutils", "9.1-1", "", ""},
	{"dpkg", "1.21.22", "", ""},
	{"apt", "2.6.1", "", ""},
	{"libc6", "2.36-9+deb12u4", "glibc", "2.36-9+deb12u9"},
	{"libc-bin", "2.36-9+deb12u4", "glibc", "2.36-9+deb12u9"},
	{"libssl3", "3.0.11-1~deb12u2", "openssl", "3.0.15-1~deb12u1"},
	{"openssl", "3.0.11-1~deb12u2", "", "3.0.15-1~deb12u1"},
	{"openssh-client", "1:9.2p1-2+deb12u2", "openssh", "1:9.2p1-2+deb12u3"},
	{"openssh-server", "1:9.2p1-2+deb12u2", "openssh", "1:9.2p1-2+deb12u3"},
	{"openssh-sftp-server", "1:9.2p1-2+deb12u2", "openssh", "1:9.2p1-2+deb12u3"},
	{"systemd", "252.22-1~deb12u1", "", "252.33-1~deb12u1"},
	{"sudo", "1.9.13p3-1+deb12u1", "", ""},
	{"curl", "7.88.1-10+deb12u5", "", "7.88.1-10+deb12u8"},
	{"libcurl4", "7.88.1-10+deb12u5", "curl", "7.88.1-10+deb12u8"},
	{"apparmor", "3.0.8-3", "", ""},
	{"xz-utils", "5.4.1-0.2", "", ""},
	{"liblzma5", "5.4.1-0.2", "xz-utils", ""},
	{"tzdata", "2024a-0+deb12u1", "", "2024b-0+deb12u1"},
	{"ca-certificates", "20230311", "", ""},
	{"python3.11", "3.11.2-6", "", "3.11.2-6+deb12u4"},
	{"git", "1:2.39.2-1.1", "", "1:2.39.5-0+deb12u1"},
	{"linux-image-6.1.0-18-amd64", "6.1.76-1", "linux-signed-amd64", ""},
	{"vim", "2:9.0.1378-2", "", ""},
	{"rsyslog", "8.2302.0-1", "", "8.2302.0-1+deb12u1"},
}

var debian12Roles = map[string][]pkg{
	"web":  {{"nginx", "1.22.1-9", "", ""}, {"libnginx-mod-http-geoip", "1.22.1-9", "nginx", ""}, {"certbot", "2.1.0-4", "python-certbot", ""}},
	"db":   {{"postgresql-15", "15.5-0+deb12u1", "", "15.10-0+deb12u1"}, {"postgresql-client-15", "15.5-0+deb12u1", "postgresql-15", "15.10-0+deb12u1"}},
	"mail": {{"sogo", "5.8.0-1", "", ""}, {"libsope1", "5.8.0-1", "sope", "5.8.0-1+deb12u1"}, {"postfix", "3.7.10-0+deb12u1", "", "3.7.11-0+deb12u1"}, {"dovecot-core", "1:2.3.19.1+dfsg1-2.1", "dovecot", "1:2.3.19.1+dfsg1-2.1+deb12u1"}},
	"ci":   {{"docker.io", "20.10.24+dfsg1-1+b3", "docker.io", ""}, {"build-essential", "12.9", "", ""}, {"golang-1.19-go", "1.19.8-2", "golang-1.19", ""}},
}

var ubuntu2204Base = []pkg{
	{"base-files", "12ubuntu4.6", "", ""},
	{"bash", "5.1-6ubuntu1.1", "", ""},
	{"coreutils", "8.32-4.1ubuntu1.2", "", ""},
	{"dpkg", "1.21.1ubuntu2.2", "", "1.21.1ubuntu2.3"},
	{"apt", "2.4.11", "", "2.4.13"},
	{"libc6", "2.35-0ubuntu3.6", "glibc", "2.35-0ubuntu3.8"},
	{"libssl3", "3.0.2-0ubuntu1.12", "openssl", "3.0.2-0ubuntu1.18"},
	{"openssl", "3.0.2-0ubuntu1.12", "", "3.0.2-0ubuntu1.18"},
	{"openssh-client", "1:8.9p1-3ubuntu0.6", "openssh", "1:8.9p1-3ubuntu0.10"},
	{"openssh-server", "1:8.9p1-3ubuntu0.6", "openssh", "1:8.9p1-3ubuntu0.10"},
	{"systemd", "249.11-0ubuntu3.12", "", ""},
	{"sudo", "1.9.9-1ubuntu2.4", "", ""},
	{"curl", "7.81.0-1ubuntu1.15", "", "7.81.0-1ubuntu1.20"},
	{"libcurl4", "7.81.0-1ubuntu1.15", "curl", "7.81.0-1ubuntu1.20"},
	{"git", "1:2.34.1-1ubuntu1.10", "", "1:2.34.1-1ubuntu1.11"},
	{"python3.10", "3.10.12-1~22.04.3", "", "3.10.12-1~22.04.7"},
	{"python3-requests", "2.25.1+dfsg-2ubuntu0.1", "requests", ""},
	{"python3-urllib3", "1.26.5-1~exp1ubuntu0.1", "python-urllib3", ""},
	{"libxml2", "2.9.13+dfsg-1ubuntu0.3", "", "2.9.13+dfsg-1ubuntu0.4"},
	{"xz-utils", "5.2.5-2ubuntu1", "", ""},
	{"tzdata", "2024a-0ubuntu0.22.04", "", "2024b-0ubuntu0.22.04"},
	{"snapd", "2.61.3+22.04", "", ""},
	{"vim", "2:8.2.3995-1ubuntu2.15", "", "2:8.2.3995-1ubuntu2.21"},
	{"linux-image-5.15.0-97-generic", "5.15.0-97.107", "linux-signed", ""},
	{"ca-certificates", "20230311ubuntu0.22.04.1", "", ""},
}

var ubuntu2204Roles = map[string][]pkg{
	"web": {{"nginx", "1.18.0-6ubuntu14.4", "", "1.18.0-6ubuntu14.5"}, {"nginx-common", "1.18.0-6ubuntu14.4", "nginx", "1.18.0-6ubuntu14.5"}},
	"ci":  {{"docker.io", "24.0.5-0ubuntu1~22.04.1", "", "24.0.7-0ubuntu2~22.04.1"}, {"build-essential", "12.9ubuntu3", "", ""}},
	"dev": {{"code", "1.85.1-1702462158", "", ""}, {"firefox", "1:1snap1-0ubuntu2", "", ""}, {"libreoffice-core", "1:7.3.7-0ubuntu0.22.04.4", "libreoffice", ""}},
}

// profile builds one simulated machine.
type profile struct {
	name   string
	weight int
	build  func(m *machine, r *rand.Rand, i int)
}

var profiles = []profile{
	{"windows11", 35, buildWindows11},
	{"windows10", 20, buildWindows10},
	{"macos", 20, buildMac},
	{"ubuntu2204", 15, buildUbuntu},
	{"debian12", 10, buildDebian},
}

// departments of workstations; "it" is the natural pilot ring.
var departments = []string{"it", "fin", "hr", "eng", "sales", "design", "ops", "legal"}

func department(r *rand.Rand) string {
	// One machine in eight is IT's.
	return departments[r.IntN(len(departments))]
}

func pickProfile(r *rand.Rand) profile {
	total := 0
	for _, p := range profiles {
		total += p.weight
	}
	n := r.IntN(total)
	for _, p := range profiles {
		if n < p.weight {
			return p
		}
		n -= p.weight
	}
	return profiles[0]
}

func ip(r *rand.Rand, subnet int) string {
	return fmt.Sprintf("10.%d.%d.%d", subnet, r.IntN(8), 10+r.IntN(240))
}

func apps(r *rand.Rand, list []app, m *machine) {
	for _, a := range list {
		if r.IntN(10) < 7 {
			v := a.versions[r.IntN(len(a.versions))]
			if a.ecosystem != "" {
				m.software = append(m.software, agentproto.Software{Name: a.name, Version: v, Ecosystem: a.ecosystem})
				continue
			}
			name := a.name
			if strings.Contains(name, "%s") {
				name = fmt.Sprintf(name, v)
			}
			sw := agent.Application(name, v, a.publisher)
			sw.Arch, sw.Channel = a.arch, a.channel
			m.software = append(m.software, sw)
		}
	}
}

func buildWindows(m *machine, r *rand.Rand, i int, cus []cumulative, edition, version, product string) {
	dept := department(r)
	m.hostname = fmt.Sprintf("%s-lt-%04d", dept, i)
	m.subnet = 20 + indexOf(departments, dept)
	// Machines lag behind by up to nine months of updates.
	cur := len(cus) - 1 - r.IntN(10)
	m.os = agentproto.OS{Platform: device.PlatformWindows, Name: edition, Version: version, Build: cus[cur].build}
	m.product = product
	m.installed = []agentproto.Update{
		{ID: cus[cur].kb, Title: cuTitle(cus[cur], product)},
		{ID: "KB5011048", Title: ".NET Framework 4.8.1 for Windows (KB5011048)"},
	}
	if cur < len(cus)-1 {
		latest := cus[len(cus)-1]
		m.pending = append(m.pending, &update{
			Update: agentproto.Update{ID: latest.kb, Title: cuTitle(latest, product), Severity: "critical"},
			build:  latest.build, kb: true, reboot: true,
		})
	}
	if r.IntN(3) == 0 {
		m.pending = append(m.pending, &update{Update: agentproto.Update{ID: "KB2267602",
			Title: "Security Intelligence Update for Microsoft Defender Antivirus - KB2267602 (Version 1.421.1576.0)", Severity: "important"}})
	}
	apps(r, windowsApps, m)
}

func buildWindows11(m *machine, r *rand.Rand, i int) {
	edition := "Windows 11 Pro"
	if r.IntN(2) == 0 {
		edition = "Windows 11 Enterprise"
	}
	buildWindows(m, r, i, win11CUs, edition, "23H2", "Windows 11 Version 23H2")
	switch n := r.IntN(10); {
	case n < 3:
		m.feature = agentproto.FeatureUpgrade{State: device.FeatureUpgradeReady, Target: "24H2"}
	case n < 4:
		m.feature = agentproto.FeatureUpgrade{State: device.FeatureUpgradeStaging, Target: "24H2"}
	}
	m.upgrade = &upgrade{os: agentproto.OS{Platform: device.PlatformWindows, Name: edition, Version: "24H2", Build: win11_24H2.build},
		product: "Windows 11 Version 24H2", kb: win11_24H2.kb, kbTitle: cuTitle(win11_24H2, "Windows 11 Version 24H2")}
}

func buildWindows10(m *machine, r *rand.Rand, i int) {
	edition := "Windows 10 Pro"
	if r.IntN(3) == 0 {
		edition = "Windows 10 Enterprise"
	}
	buildWindows(m, r, i, win10CUs, edition, "22H2", "Windows 10 Version 22H2")
	if r.IntN(10) < 3 {
		m.feature = agentproto.FeatureUpgrade{State: device.FeatureUpgradeReady, Target: "Windows 11 23H2"}
	}
	latest := win11CUs[len(win11CUs)-1]
	m.upgrade = &upgrade{os: agentproto.OS{Platform: device.PlatformWindows, Name: strings.Replace(edition, "10", "11", 1), Version: "23H2", Build: latest.build},
		product: "Windows 11 Version 23H2", kb: latest.kb, kbTitle: cuTitle(latest, "Windows 11 Version 23H2")}
}

func buildMac(m *machine, r *rand.Rand, i int) {
	dept := []string{"design", "eng", "it", "sales"}[r.IntN(4)]
	m.hostname = fmt.Sprintf("%s-mbp-%04d", dept, i)
	m.subnet = 20 + indexOf(departments, dept)
	rel := macReleases[r.IntN(len(macReleases))]
	m.os = agentproto.OS{Platform: device.PlatformMacOS, Name: "macOS", Version: rel.version, Build: rel.build}
	m.product = "macOS"
	major, _, _ := strings.Cut(rel.version, ".")
	if latest := macLatest[major]; latest.version != rel.version {
		m.pending = append(m.pending, &update{
			Update:  agentproto.Update{ID: fmt.Sprintf("macOS %s %s-%s", latest.name, latest.version, latest.build), Title: fmt.Sprintf("macOS %s %s", latest.name, latest.version), Severity: "critical"},
			version: latest.version, build: latest.build, reboot: true,
		})
	}
	if major == "14" && r.IntN(10) < 3 {
		m.feature = agentproto.FeatureUpgrade{State: device.FeatureUpgradeReady, Target: macSequoia.version}
	}
	m.upgrade = &upgrade{os: agentproto.OS{Platform: device.PlatformMacOS, Name: "macOS", Version: macSequoia.version, Build: macSequoia.build}, product: "macOS"}
	apps(r, macApps, m)
	if dept == "eng" {
		apps(r, pythonApps, m)
	}
}

func buildLinux(m *machine, r *rand.Rand, i int, eco, name, version, kernel, arch string, base []pkg, roles map[string][]pkg, roleNames []string) {
	role := roleNames[r.IntN(len(roleNames))]
	m.hostname = fmt.Sprintf("%s-%s-%04d", role, []string{"prod", "prod", "stage"}[r.IntN(3)], i)
	m.subnet = 10
	m.os = agentproto.OS{Platform: device.PlatformLinux, Name: name, Version: version, Build: kernel}
	all := append(append([]pkg(nil), base...), roles[role]...)
	for _, p := range all {
		v := p.version
		// Some machines are patched already.
		patched := p.update != "" && r.IntN(4) == 0
		if patched {
			v = p.update
		}
		m.software = append(m.software, agentproto.Software{Name: p.name, Version: v, Ecosystem: eco, Arch: arch, Source: p.source})
		if p.update != "" && !patched {
			m.pending = append(m.pending, &update{
				Update:   agentproto.Update{ID: p.name, Title: fmt.Sprintf("%s %s → %s", p.name, p.version, p.update)},
				packages: map[string]string{p.name: p.update},
			})
		}
	}
	if role == "dev" || role == "ci" {
		apps(r, pythonApps, m)
	}
}

func buildUbuntu(m *machine, r *rand.Rand, i int) {
	buildLinux(m, r, i, "Ubuntu:22.04:LTS", "Ubuntu", "22.04", "5.15.0-97-generic", "amd64", ubuntu2204Base, ubuntu2204Roles, []string{"web", "ci", "dev", "it"})
}

func buildDebian(m *machine, r *rand.Rand, i int) {
	buildLinux(m, r, i, "Debian:12", "Debian GNU/Linux", "12", "6.1.0-18-amd64", "amd64", debian12Base, debian12Roles, []string{"web", "db", "mail", "ci"})
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return 0
}
