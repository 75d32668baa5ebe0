package agent

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/agentproto"
)

func mustOpen(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestEcosystem(t *testing.T) {
	tests := []struct {
		name string
		osr  string
		want string
	}{
		{"debian", "ID=debian\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"", "Debian:12"},
		{"debian point release", "ID=debian\nVERSION_ID=\"11.9\"", "Debian:11"},
		{"debian sid", "ID=debian\nPRETTY_NAME=\"Debian GNU/Linux trixie/sid\"", "Debian"},
		{"ubuntu lts", "ID=ubuntu\nVERSION_ID=\"22.04\"\nVERSION=\"22.04.4 LTS (Jammy Jellyfish)\"", "Ubuntu:22.04:LTS"},
		{"ubuntu interim", "ID=ubuntu\nVERSION_ID=\"23.10\"\nVERSION=\"23.10 (Mantic Minotaur)\"", "Ubuntu:23.10"},
		{"alpine", "ID=alpine\nVERSION_ID=3.19.1", "Alpine:v3.19"},
		{"alma", "ID=\"almalinux\"\nVERSION_ID=\"9.3\"", "AlmaLinux:9"},
		{"rocky", "ID=\"rocky\"\nVERSION_ID=\"9.3\"", "Rocky Linux:9"},
		{"rhel", "ID=\"rhel\"\nVERSION_ID=\"9.4\"", "Red Hat:9"},
		{"other", "ID=arch\nNAME=\"Arch Linux\"", "Arch Linux"},
		{"fedora", "ID=fedora\nNAME=\"Fedora Linux\"\nVERSION_ID=40", "Fedora Linux:40"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Ecosystem(ParseOSRelease(strings.NewReader(tt.osr))); got != tt.want {
				t.Errorf("Ecosystem = %q, want %q", got, tt.want)
			}
		})
	}
	osr := ParseOSRelease(mustOpen(t, "os-release-ubuntu"))
	if osr["NAME"] != "Ubuntu" || osr["VERSION_ID"] != "22.04" || osr["PRETTY_NAME"] != "Ubuntu 22.04.4 LTS" {
		t.Errorf("os-release = %v", osr)
	}
}

func TestParseDpkgStatus(t *testing.T) {
	got, err := ParseDpkgStatus(mustOpen(t, "dpkg-status"), "Debian:12")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]agentproto.Software{}
	for _, sw := range got {
		byName[sw.Name] = sw
	}
	if _, ok := byName["oldpkg"]; ok {
		t.Error("a package removed but for its configuration is listed")
	}
	want := map[string]agentproto.Software{
		"openssh-client": {Name: "openssh-client", Version: "1:9.2p1-2+deb12u6", Ecosystem: "Debian:12", Arch: "amd64", Source: "openssh"},
		"bash":           {Name: "bash", Version: "5.2.15-2+b8", Ecosystem: "Debian:12", Arch: "amd64"},
		"python3-jwt":    {Name: "python3-jwt", Version: "2.6.0-1", Ecosystem: "Debian:12", Arch: "all", Source: "pyjwt"},
	}
	for name, w := range want {
		if diff := cmp.Diff(w, byName[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if len(got) != 7 {
		t.Errorf("%d packages, want 7", len(got))
	}
}

func TestParseRPMQuery(t *testing.T) {
	out, err := os.ReadFile("testdata/rpm-qa.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := ParseRPMQuery(out, "AlmaLinux:9")
	want := []agentproto.Software{
		{Name: "openssh-server", Version: "8.7p1-38.el9_4.1", Ecosystem: "AlmaLinux:9", Arch: "x86_64", Source: "openssh"},
		{Name: "bash", Version: "5.1.8-9.el9", Ecosystem: "AlmaLinux:9", Arch: "x86_64"},
		{Name: "openssl-libs", Version: "1:3.0.7-27.el9", Ecosystem: "AlmaLinux:9", Arch: "x86_64", Source: "openssl"},
		{Name: "tzdata", Version: "2024a-1.el9", Ecosystem: "AlmaLinux:9", Arch: "noarch"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseRPMQuery (-want +got):\n%s", diff)
	}
}

func TestParseAPKInstalled(t *testing.T) {
	got, err := ParseAPKInstalled(mustOpen(t, "apk-installed"), "Alpine:v3.19")
	if err != nil {
		t.Fatal(err)
	}
	want := []agentproto.Software{
		{Name: "musl", Version: "1.2.4_git20230717-r4", Ecosystem: "Alpine:v3.19", Arch: "x86_64"},
		{Name: "libcrypto3", Version: "3.1.4-r5", Ecosystem: "Alpine:v3.19", Arch: "x86_64", Source: "openssl"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseAPKInstalled (-want +got):\n%s", diff)
	}
}

func TestParseUpdates(t *testing.T) {
	apt, err := os.ReadFile("testdata/apt-simulate.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := ParseAptSimulate(apt)
	want := []agentproto.Update{
		{ID: "base-files", Title: "base-files 12.4+deb12u11 → 12.4+deb12u15 (Debian:12.15/oldstable)"},
		{ID: "bash", Title: "bash 5.2.15-2+b8 → 5.2.15-2+b13 (Debian:12.15/oldstable)"},
		{ID: "libgcrypt20-dev", Title: "libgcrypt20-dev 1.10.1-3 → 1.10.1-3+deb12u1 (Debian:12.15/oldstable, Debian-Security:12/oldstable-security)", Severity: "security"},
		{ID: "libgcrypt20", Title: "libgcrypt20 1.10.1-3 → 1.10.1-3+deb12u1 (Debian:12.15/oldstable, Debian-Security:12/oldstable-security)", Severity: "security"},
		{ID: "liblzma-dev", Title: "liblzma-dev 5.4.1-1 → 5.4.1-1+deb12u2 (Debian-Security:12/oldstable-security)", Severity: "security"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseAptSimulate (-want +got):\n%s", diff)
	}

	dnf := "\nopenssh-server.x86_64      8.7p1-38.el9_4.4      baseos\nkernel.x86_64    5.14.0-427.24.1.el9_4    baseos\nObsoleting Packages\n"
	if diff := cmp.Diff([]agentproto.Update{
		{ID: "openssh-server", Title: "openssh-server 8.7p1-38.el9_4.4 (baseos)"},
		{ID: "kernel", Title: "kernel 5.14.0-427.24.1.el9_4 (baseos)"},
	}, ParseDNFCheckUpdate([]byte(dnf))); diff != "" {
		t.Errorf("ParseDNFCheckUpdate (-want +got):\n%s", diff)
	}

	apk := "Installed:                                Available:\nlibcrypto3-3.1.4-r5                     < 3.1.4-r6\nmusl-1.2.4_git20230717-r4               < 1.2.4_git20230717-r5\n"
	if diff := cmp.Diff([]agentproto.Update{
		{ID: "libcrypto3", Title: "libcrypto3-3.1.4-r5 → 3.1.4-r6"},
		{ID: "musl", Title: "musl-1.2.4_git20230717-r4 → 1.2.4_git20230717-r5"},
	}, ParseAPKVersion([]byte(apk))); diff != "" {
		t.Errorf("ParseAPKVersion (-want +got):\n%s", diff)
	}
}
