package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/patchline/patchline/internal/agentproto"
)

func TestReadWindowsInventory(t *testing.T) {
	inv, err := ReadWindowsInventory(mustReadReg(t, "windows11-23h2.reg"))
	if err != nil {
		t.Fatal(err)
	}
	want := &WindowsInventory{
		// ProductName says Windows 10 on Windows 11: the build tells.
		OS:   agentproto.OS{Platform: "windows", Name: "Windows 11 Pro", Version: "23H2", Build: "22631.4460"},
		Arch: "amd64",
		Software: []agentproto.Software{
			{Name: "Windows 11 Version 23H2", Version: "10.0.22631.4460", Ecosystem: "Windows", Arch: "x64"},
			{Name: "7-Zip", Version: "23.01", Ecosystem: "Desktop", Publisher: "Igor Pavlov"},
			{Name: "Mozilla Firefox", Version: "115.0", Ecosystem: "Desktop", Publisher: "Mozilla"},
			{Name: "Microsoft 365 Apps for enterprise", Version: "16.0.17029.20108", Ecosystem: "Microsoft", Arch: "x64",
				Publisher: "Microsoft Corporation", Channel: "Current Channel"},
			{Name: "Notepad++", Version: "8.5.8", Ecosystem: "Desktop", Publisher: "Notepad++ Team"},
		},
		// KB5044285 is staged, not installed; the rollup names no KB.
		Updates: []agentproto.Update{{ID: "KB5011048"}, {ID: "KB5046633"}},
		Office:  &ClickToRun{Version: "16.0.17029.20108", Platform: "x64", Channel: "Current Channel", Products: []string{"O365ProPlusRetail"}},
	}
	if diff := cmp.Diff(want, inv); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
}

func TestWindowsCatalogProduct(t *testing.T) {
	for _, tc := range []struct {
		name, display string
		build         int
		installType   string
		want          string
	}{
		{"Windows 10 Enterprise", "22H2", 19045, "Client", "Windows 10 Version 22H2"},
		{"Windows 11 Pro", "24H2", 26100, "Client", "Windows 11 Version 24H2"},
		{"Windows Server 2022 Datacenter", "21H2", 20348, "Server", "Windows Server 2022"},
		{"Windows Server 2019 Standard", "", 17763, "Server Core", "Windows Server 2019 (Server Core installation)"},
		{"Windows Server vNext", "", 30000, "Server", ""},
		{"Windows 10 Pro", "", 10240, "Client", ""},
	} {
		if got := windowsCatalogProduct(tc.name, tc.display, tc.build, tc.installType); got != tc.want {
			t.Errorf("windowsCatalogProduct(%q, %q, %d, %q) = %q, want %q", tc.name, tc.display, tc.build, tc.installType, got, tc.want)
		}
	}
}

func TestWindowsRebootPending(t *testing.T) {
	reg := mustReadReg(t, "windows11-23h2.reg")
	if windowsRebootPending(reg) {
		t.Fatal("reboot pending without any mark")
	}
	reg.SetValue(regSessionManager, "PendingFileRenameOperations", RegValue{Kind: RegMultiString, Strings: []string{`\??\C:\a`, ""}})
	if !windowsRebootPending(reg) {
		t.Error("PendingFileRenameOperations: want a pending reboot")
	}
	reg = mustReadReg(t, "windows11-23h2.reg")
	reg.SetValue(regWURebootRequired, "", RegValue{Kind: RegString})
	if !windowsRebootPending(reg) {
		t.Error("WindowsUpdate RebootRequired: want a pending reboot")
	}
}

func TestReadWindowsInventoryWithoutVersion(t *testing.T) {
	if _, err := ReadWindowsInventory(NewMemRegistry()); err == nil {
		t.Error("no CurrentVersion key: want an error")
	}
}
