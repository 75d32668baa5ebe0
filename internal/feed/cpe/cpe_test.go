package cpe

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Name
		ok   bool
	}{
		{"cpe:2.3:a:apache:log4j:2.0:*:*:*:*:*:*:*", Name{"a", "apache", "log4j"}, true},
		{`cpe:2.3:a:go_standard_library:net\/http:*:*:*:*:*:*:*:*`, Name{"a", "go_standard_library", "net/http"}, true},
		{`cpe:2.3:o:ricon:s9922l_firmware:16.10.3\(3794\):*:*:*:*:*:*:*`, Name{"o", "ricon", "s9922l_firmware"}, true},
		{`cpe:2.3:a:acme:a\:b:*`, Name{"a", "acme", "a:b"}, true},
		{"cpe:2.3:a:*:log4j:*", Name{}, false},
		{"cpe:2.3:a:apache:-:*", Name{}, false},
		{"cpe:2.3:a::log4j:*", Name{}, false},
		{"cpe:2.3:a:apache", Name{}, false},
		{"cpe:/a:apache:log4j:2.0", Name{}, false},
		{"", Name{}, false},
	}
	for _, tt := range tests {
		got, ok := Parse(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestEcosystem(t *testing.T) {
	tests := []struct {
		part, vendor, product string
		want                  string
	}{
		{"o", "apple", "macos", Apple},
		{"", "Apple Inc.", "iOS and iPadOS", Apple},
		{"o", "microsoft", "windows_server_2019", Windows},
		{"o", "microsoft", "windows", Windows},
		{"", "Microsoft", "Windows Server 2022", Windows},
		{"", "Microsoft Corporation", "Windows 11 version 22H2", Windows},
		{"a", "microsoft", "exchange_server", Microsoft},
		{"", "Microsoft", "Microsoft Edge (Chromium-based)", Microsoft},
		{"a", "mozilla", "firefox_esr", Desktop},
		{"", "Mozilla", "Firefox ESR", Desktop},
		{"", "VideoLAN", "VLC media player", Desktop},
		{"", "The Document Foundation", "LibreOffice", Desktop},
		{"a", "7-zip", "7zip", Desktop},
		// A desktop application's name on an operating system or hardware
		// CPE is not the application.
		{"o", "google", "chrome", Vendor},
		{"a", "apache", "log4j", Vendor},
		{"", "Palo Alto Networks", "PAN-OS", Vendor},
	}
	for _, tt := range tests {
		if got := Ecosystem(tt.part, tt.vendor, tt.product); got != tt.want {
			t.Errorf("Ecosystem(%q, %q, %q) = %q, want %q", tt.part, tt.vendor, tt.product, got, tt.want)
		}
	}
}
