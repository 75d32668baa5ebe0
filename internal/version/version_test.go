package version

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The versions below come from the sample data: internal/sample/data/osv
// (Go, PyPA, RustSec, AlmaLinux, GHSA), debian/, msrc/ and the Alpine and
// Ubuntu trackers in the shared data folder.

func TestCompare(t *testing.T) {
	tests := []struct {
		name      string
		ecosystem string
		a, b      string
		want      int
	}{
		{"debian revision", "Debian:12", "5.8.0-1+deb12u1", "5.12.1-2", -1},
		{"debian tilde sorts first", "Debian:11", "98.0.4758.80-1~deb11u1", "98.0.4758.80-1", -1},
		{"debian zero", "Debian", "0", "0.8-2", -1},
		{"debian same", "Debian:12", "1.6.0.2-1", "1.6.0.2-1", 0},
		{"ubuntu", "Ubuntu:22.04:LTS", "1.0.1-4ubuntu5.12", "1.0.1c-3ubuntu2.7", -1},
		{"ubuntu esm", "Ubuntu:14.04:LTS", "5.5.9+dfsg-1ubuntu4.29+esm6", "5.5.9+dfsg-1ubuntu4.29", 1},
		{"almalinux module", "AlmaLinux:8", "0.0.99.4-5.module_el8.9.0+3627+db8ec155", "0.0.99.4-5.module_el8.9.0+3643+9234dc3b", -1},
		{"almalinux release", "AlmaLinux:9", "0.0.99.4-6.el9_3", "0.0.99.4-5.module_el8.9.0+3643+9234dc3b", 1},
		{"almalinux glibc", "AlmaLinux:8", "2.28-225.el8_8.6", "2.28-225.el8_8.11", -1},
		{"azure linux is rpm", "Azure Linux:2", "8.2.3668-1", "8.2.4081-1", -1},
		{"alpine", "Alpine:v3.11", "2.32-r0", "2.32-r1", -1},
		{"alpine numeric", "Alpine:v3.19", "14.2.3-r0", "1.2.8-r0", 1},
		{"pypi calver", "PyPI", "2023.9.18", "2023.9.4", 1},
		{"pypi", "PyPI", "2.31.0", "2.3.0", 1},
		{"pypi pre-release", "PyPI", "2.31.0rc1", "2.31.0", -1},
		{"maven release qualifier", "Maven", "5.2.20.RELEASE", "5.2.20", 0},
		{"maven", "Maven", "2.12.2", "2.15.0", -1},
		{"maven backport", "Maven", "2.3.1", "2.12.2", -1},
		{"npm", "npm", "7.5.2", "6.3.1", 1},
		{"npm lodash", "npm", "4.17.21", "4.17.3", 1},
		{"go", "Go", "1.56.3", "1.57.1", -1},
		{"go stdlib", "Go", "1.21.9", "1.21.11", -1},
		{"crates", "crates.io", "0.3.17", "0.3.2", 1},
		{"crates openssl-src", "crates.io", "111.18.0", "300.0.5", -1},
		{"windows build", "Windows", "10.0.17763.2029", "10.0.17763.6293", -1},
		{"windows release", "Windows", "10.0.20348.2700", "10.0.17763.6293", 1},
		{"windows leading zero", "Windows", "10.0.17763.02029", "10.0.17763.2029", 0},
		{"microsoft office", "Microsoft", "16.0.5422.1000", "16.0.10406.20006", -1},
		{"microsoft edge", "Microsoft", "116.0.1938.81", "116.0.1938.76", 1},
		{"microsoft trailing zero", "Microsoft", "6.0.25", "6.0.25.0", 0},
		{"apple", "Apple", "17.0.3", "17.1", -1},
		{"apple single", "Apple", "17", "16.7.2", 1},
		{"desktop", "Desktop", "23.01", "22.01", 1},
		{"desktop letter suffix", "Desktop", "1.1.1w", "1.1.1", 1},
		{"desktop rc", "Desktop", "2.15.0-rc2", "2.15.0", -1},
		{"vendor openssh", "Vendor", "9.3p2", "9.3p1", 1},
		{"vendor v", "Vendor", "v7.0.0", "7.0.1", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compare(tt.ecosystem, tt.a, tt.b)
			if err != nil {
				t.Fatalf("Compare(%q, %q, %q): %v", tt.ecosystem, tt.a, tt.b, err)
			}
			if got != tt.want {
				t.Errorf("Compare(%q, %q, %q) = %d, want %d", tt.ecosystem, tt.a, tt.b, got, tt.want)
			}
			back, err := Compare(tt.ecosystem, tt.b, tt.a)
			if err != nil || back != -tt.want {
				t.Errorf("Compare(%q, %q, %q) = %d, %v, want %d", tt.ecosystem, tt.b, tt.a, back, err, -tt.want)
			}
		})
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		ecosystem string
		v         string
		want      bool
	}{
		{"Windows", "10.0.17763.2029", true},
		{"Windows", "KB5004947", false},
		{"Windows", "5004947", false},
		{"Microsoft", "15.02.1118.021", true},
		{"Microsoft", "https://aka.ms/OfficeSecurityReleases", false},
		{"Microsoft", "App Build 14.43.49498, Platform Build 14.0.49494", false},
		{"Microsoft", "3.0.6920.8954; 2.0.50727.8970", false},
		{"Microsoft", "112.0.5615.49/50", false},
		{"Microsoft", "10.0.17763.", false},
		{"Apple", "17.0.3", true},
		{"Apple", "17.0.3 (a)", false},
		{"Desktop", "23.01", true},
		{"Desktop", "2.15.0-rc2", true},
		{"Desktop", "1.1.1w", true},
		{"Vendor", "RHSA-2021:5217", false},
		{"Vendor", "cisco-sa-20180328-smi2", false},
		{"Vendor", "1:0.17-65.el7_6", false},
		{"Debian:12", "5.0.1-2+deb11u1", true},
		{"Debian:12", "not a version", false},
		{"Debian:12", "", false},
		{"Ubuntu:22.04:LTS", "1.0.1-4ubuntu5.12", true},
		{"AlmaLinux:8", "2.28-225.el8_8.6", true},
		{"AlmaLinux:8", "-", false},
		{"Azure Linux:3", "6.6.92.2-1", true},
		{"Alpine:v3.19", "2.32-r0", true},
		{"Alpine:v3.19", "r0-2.32", false},
		{"PyPI", "2023.9.18", true},
		{"PyPI", "74ea7cf7a6a27a4eeb2ae24e162bcc942a6706d5", false},
		{"npm", "7.5.2", true},
		{"npm", "latest", false},
		{"Go", "1.56.3", true},
		{"Go", "v0.0.0-20231010203224-d3db7b7b8e36", true},
		{"Go", "f2180b4d5403d2210b30b93098eb7da31c05c721", false},
		{"crates.io", "0.0.0-0", true},
		{"Maven", "5.2.20.RELEASE", true},
		{"Maven", "RELEASE", false},
		{"Linux", "6.6", false},
		{"NoSuchEcosystem", "1.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.ecosystem+"/"+tt.v, func(t *testing.T) {
			if got := Valid(tt.ecosystem, tt.v); got != tt.want {
				_, err := Parse(tt.ecosystem, tt.v)
				t.Errorf("Valid(%q, %q) = %v, want %v (Parse: %v)", tt.ecosystem, tt.v, got, tt.want, err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse("NoSuchEcosystem", "1.0"); !errors.Is(err, ErrUnknownEcosystem) {
		t.Errorf("unknown ecosystem: got %v, want ErrUnknownEcosystem", err)
	}
	if _, err := Parse("Windows", "KB5004947"); !errors.Is(err, ErrInvalid) {
		t.Errorf("KB: got %v, want ErrInvalid", err)
	}
	if _, err := Compare("Debian:12", "1.0-1", "not a version"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Compare with a bad version: got %v, want ErrInvalid", err)
	}
	w, err := Parse("Windows", "10.0.17763.2029")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Parse("Apple", "17.0.3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Compare(a); !errors.Is(err, ErrIncomparable) {
		t.Errorf("Windows with Apple: got %v, want ErrIncomparable", err)
	}
	m, err := Parse("Microsoft", "10.0.17763.6293")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := w.Compare(m); err != nil || c != -1 {
		t.Errorf("Windows with Microsoft build: got %d, %v, want -1", c, err)
	}
	d11, _ := Parse("Debian:11", "98.0.4758.80-1~deb11u1")
	d12, _ := Parse("Debian:12", "98.0.4758.80-1")
	if c, err := d11.Compare(d12); err != nil || c != -1 {
		t.Errorf("Debian releases: got %d, %v, want -1", c, err)
	}
	if d11.String() != "98.0.4758.80-1~deb11u1" || d11.Ecosystem() != "Debian:11" {
		t.Errorf("String, Ecosystem = %q, %q", d11.String(), d11.Ecosystem())
	}
	var zero Version
	if _, err := zero.Compare(d11); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero Version: got %v, want ErrInvalid", err)
	}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		ecosystem string
		in        []string
		want      []string
	}{
		{
			"Windows",
			[]string{"KB5004947", "10.0.20348.2700", "10.0.17763.6293", "10.0.17763.2029"},
			[]string{"10.0.17763.2029", "10.0.17763.6293", "10.0.20348.2700", "KB5004947"},
		},
		{
			"Maven",
			[]string{"2.15.0", "2.3.1", "2.12.2"},
			[]string{"2.3.1", "2.12.2", "2.15.0"},
		},
		{
			"Go",
			[]string{"1.58.3", "1.56.3", "1.57.1"},
			[]string{"1.56.3", "1.57.1", "1.58.3"},
		},
		{
			"NoSuchEcosystem",
			[]string{"b", "a"},
			[]string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.ecosystem, func(t *testing.T) {
			got := slices.Clone(tt.in)
			slices.SortFunc(got, func(a, b string) int { return Order(tt.ecosystem, a, b) })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("sorted (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzCompare(f *testing.F) {
	f.Add("Debian:12", "5.8.0-1+deb12u1", "98.0.4758.80-1~deb11u1")
	f.Add("AlmaLinux:8", "2.28-225.el8_8.6", "0.0.99.4-5.module_el8.9.0+3627+db8ec155")
	f.Add("Alpine:v3.19", "2.32-r0", "1.2.8_pre1-r0")
	f.Add("PyPI", "2023.9.18", "2.31.0rc1")
	f.Add("Maven", "5.2.20.RELEASE", "2.15.0")
	f.Add("npm", "7.5.2", "1.0.0-beta.1")
	f.Add("Go", "v0.0.0-20231010203224-d3db7b7b8e36", "1.56.3")
	f.Add("crates.io", "0.0.0-0", "0.3.17")
	f.Add("RubyGems", "7.0.4.1", "6.1.7.2")
	f.Add("Packagist", "8.3.19", "v1.0.0-RC1")
	f.Add("NuGet", "6.0.25", "1.0.0-preview")
	f.Add("Windows", "10.0.17763.2029", "KB5004947")
	f.Add("Apple", "17.0.3", "17")
	f.Add("Desktop", "1.1.1w", "9.3p2")
	f.Fuzz(func(t *testing.T, ecosystem, a, b string) {
		c, err := Compare(ecosystem, a, b)
		if err != nil {
			return
		}
		if c < -1 || c > 1 {
			t.Fatalf("Compare(%q, %q, %q) = %d", ecosystem, a, b, c)
		}
		if !Valid(ecosystem, a) || !Valid(ecosystem, b) {
			t.Fatalf("Compare succeeded on versions Valid rejects")
		}
		_ = Order(ecosystem, a, b)
	})
}
