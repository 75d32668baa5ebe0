package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/agentproto"
)

// The display names are real Programs and Features entries, as the
// Windows Package Manager community repository records them for each
// installer (microsoft/winget-pkgs, MIT; AppsAndFeaturesEntries of
// manifests/m/Mozilla/Firefox/115.0 and manifests/7/7zip/7zip/23.01), and
// macOS application names as system_profiler lists them.
func TestApplication(t *testing.T) {
	for _, tc := range []struct {
		name, display, version, publisher string
		want                              agentproto.Software
	}{
		{"firefox x64", "Mozilla Firefox (x64 en-US)", "115.0", "Mozilla", agentproto.Software{Name: "Mozilla Firefox", Version: "115.0", Ecosystem: "Desktop", Publisher: "Mozilla"}},
		{"firefox x86 locale", "Mozilla Firefox (x86 zh-CN)", "115.0", "Mozilla", agentproto.Software{Name: "Mozilla Firefox", Version: "115.0", Ecosystem: "Desktop", Publisher: "Mozilla"}},
		{"firefox short locale", "Mozilla Firefox (x64 de)", "115.0", "Mozilla", agentproto.Software{Name: "Mozilla Firefox", Version: "115.0", Ecosystem: "Desktop", Publisher: "Mozilla"}},
		{"7-zip exe", "7-Zip 23.01 (x64)", "23.01", "Igor Pavlov", agentproto.Software{Name: "7-Zip", Version: "23.01", Ecosystem: "Desktop", Publisher: "Igor Pavlov"}},
		{"7-zip msi", "7-Zip 23.01 (x64 edition)", "23.01.00.0", "Igor Pavlov", agentproto.Software{Name: "7-Zip", Version: "23.01.00.0", Ecosystem: "Desktop", Publisher: "Igor Pavlov"}},
		{"7-zip x86", "7-Zip 23.01", "23.01", "Igor Pavlov", agentproto.Software{Name: "7-Zip", Version: "23.01", Ecosystem: "Desktop", Publisher: "Igor Pavlov"}},
		{"notepad++", "Notepad++ (32-bit x86)", "8.5.8", "Notepad++ Team", agentproto.Software{Name: "Notepad++", Version: "8.5.8", Ecosystem: "Desktop", Publisher: "Notepad++ Team"}},
		{"microsoft 365", "Microsoft 365 Apps for enterprise - en-us", "16.0.17029.20108", "Microsoft Corporation", agentproto.Software{Name: "Microsoft 365 Apps for enterprise", Version: "16.0.17029.20108", Ecosystem: "Microsoft", Publisher: "Microsoft Corporation"}},
		{"edge stays desktop", "Microsoft Edge", "131.0.2903.112", "Microsoft Corporation", agentproto.Software{Name: "Microsoft Edge", Version: "131.0.2903.112", Ecosystem: "Desktop", Publisher: "Microsoft Corporation"}},
		{"mac app", "Firefox", "115.0", "", agentproto.Software{Name: "Firefox", Version: "115.0", Ecosystem: "Desktop"}},
		{"spaces folded", "  Google   Chrome ", "124.0.6367.119", "Google LLC", agentproto.Software{Name: "Google Chrome", Version: "124.0.6367.119", Ecosystem: "Desktop", Publisher: "Google LLC"}},
		{"a name that is only a version keeps it", "2024.1", "2024.1", "", agentproto.Software{Name: "2024.1", Version: "2024.1", Ecosystem: "Desktop"}},
		{"an unrelated parenthesis stays", "Foo (Beta)", "1.0", "", agentproto.Software{Name: "Foo (Beta)", Version: "1.0", Ecosystem: "Desktop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Application(tc.display, tc.version, tc.publisher)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Application(%q, %q, %q) (-want +got):\n%s", tc.display, tc.version, tc.publisher, diff)
			}
		})
	}
}
