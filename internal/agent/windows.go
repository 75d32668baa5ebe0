package agent

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/patchline/patchline/internal/agentproto"
	"github.com/patchline/patchline/internal/device"
)

// The registry keys the Windows inventory reads.
const (
	hklm                  = `HKEY_LOCAL_MACHINE`
	regCurrentVersion     = hklm + `\SOFTWARE\Microsoft\Windows NT\CurrentVersion`
	regUninstall          = `\SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall`
	regUninstallWOW       = `\SOFTWARE\WOW6432Node\Microsoft\Windows\CurrentVersion\Uninstall`
	regUsers              = `HKEY_USERS`
	regClickToRun         = hklm + `\SOFTWARE\Microsoft\Office\ClickToRun\Configuration`
	regCBSPackages        = hklm + `\SOFTWARE\Microsoft\Windows\CurrentVersion\Component Based Servicing\Packages`
	regCBSRebootPending   = hklm + `\SOFTWARE\Microsoft\Windows\CurrentVersion\Component Based Servicing\RebootPending`
	regWURebootRequired   = hklm + `\SOFTWARE\Microsoft\Windows\CurrentVersion\WindowsUpdate\Auto Update\RebootRequired`
	regSessionManager     = hklm + `\SYSTEM\CurrentControlSet\Control\Session Manager`
	regSystemEnvironment  = regSessionManager + `\Environment`
	regWindowsUpdatePol   = hklm + `\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate`
	regWindowsUpdatePolAU = regWindowsUpdatePol + `\AU`
)

// WindowsInventory is what the registry tells of a Windows endpoint.
type WindowsInventory struct {
	OS   agentproto.OS
	Arch string // the machine's: amd64, arm64 or 386
	// Software is the operating system as the catalog names it (product
	// "Windows 11 Version 23H2", version "10.0.22631.4460"), then the
	// installed programs.
	Software []agentproto.Software
	// Updates are the installed updates the registry lists (servicing
	// packages and the KB entries of Programs and Features).
	Updates       []agentproto.Update
	RebootPending bool
	// Office is the Click-to-Run installation of Microsoft 365 Apps or
	// Office, when there is one.
	Office *ClickToRun
}

// ClickToRun is an Office Click-to-Run installation.
type ClickToRun struct {
	Version  string // VersionToReport: 16.0.17029.20108
	Platform string // x64 or x86
	Channel  string // "Current Channel", …, or the update URL when unknown
	Products []string
}

// ReadWindowsInventory reads the inventory of a Windows endpoint from its
// registry. Only a missing CurrentVersion key is an error: every other
// part that is missing is left out.
func ReadWindowsInventory(reg Registry) (*WindowsInventory, error) {
	cv, err := reg.Values(regCurrentVersion)
	if err != nil {
		return nil, fmt.Errorf("read the Windows version: %w", err)
	}
	str := func(name string) string {
		v, ok := cv[name]
		if !ok {
			return ""
		}
		return strings.TrimSpace(v.Text())
	}
	inv := &WindowsInventory{Arch: windowsArch(regString(reg, regSystemEnvironment, "PROCESSOR_ARCHITECTURE"))}
	build := str("CurrentBuildNumber")
	if build == "" {
		build = str("CurrentBuild")
	}
	ubr := str("UBR")
	display := str("DisplayVersion")
	if display == "" {
		display = str("ReleaseId")
	}
	fullBuild := build
	if ubr != "" {
		fullBuild += "." + ubr
	}
	installType := str("InstallationType")
	name := str("ProductName")
	buildNo, _ := strconv.Atoi(build)
	server := strings.HasPrefix(installType, "Server")
	if !server && buildNo >= 22000 {
		// Windows 11 keeps "Windows 10" in ProductName.
		name = strings.Replace(name, "Windows 10", "Windows 11", 1)
	}
	inv.OS = agentproto.OS{Platform: device.PlatformWindows, Name: name, Version: display, Build: fullBuild}
	if product := windowsCatalogProduct(name, display, buildNo, installType); product != "" && build != "" {
		inv.Software = append(inv.Software, agentproto.Software{
			Name: product, Version: "10.0." + fullBuild, Ecosystem: "Windows", Arch: catalogArch(inv.Arch),
		})
	}
	programs, kbs := windowsPrograms(reg)
	inv.Software = append(inv.Software, programs...)
	inv.Updates = mergeUpdates(kbs, servicingKBs(reg))
	inv.Office = clickToRun(reg)
	if inv.Office != nil {
		// Microsoft names Office and Microsoft 365 Apps per platform;
		// which build fixes a CVE depends on the channel.
		for i, sw := range inv.Software {
			if sw.Ecosystem == "Microsoft" && sw.Version == inv.Office.Version {
				inv.Software[i].Arch = catalogArch(windowsArch(inv.Office.Platform))
				inv.Software[i].Channel = inv.Office.Channel
			}
		}
	}
	inv.RebootPending = windowsRebootPending(reg)
	return inv, nil
}

// windowsArch maps PROCESSOR_ARCHITECTURE to Go's names.
func windowsArch(a string) string {
	switch strings.ToUpper(a) {
	case "AMD64", "X64":
		return "amd64"
	case "ARM64":
		return "arm64"
	case "X86":
		return "386"
	}
	return ""
}

// catalogArch names an architecture as the catalog's Windows products do.
func catalogArch(goarch string) string {
	switch goarch {
	case "amd64":
		return "x64"
	case "arm64":
		return "arm64"
	case "386":
		return "x86"
	}
	return ""
}

// windowsServers are the Windows Server releases by build, as MSRC names
// them.
var windowsServers = map[int]string{
	14393: "Windows Server 2016",
	17763: "Windows Server 2019",
	20348: "Windows Server 2022",
	25398: "Windows Server 2022, 23H2 Edition",
	26100: "Windows Server 2025",
}

// windowsCatalogProduct returns the operating system as MSRC names it in
// the catalog: "Windows 11 Version 23H2", "Windows 10 Version 22H2",
// "Windows Server 2022 (Server Core installation)"; "" when unknown.
func windowsCatalogProduct(name string, display string, build int, installType string) string {
	if strings.HasPrefix(installType, "Server") {
		p, ok := windowsServers[build]
		if !ok {
			return ""
		}
		if installType == "Server Core" {
			p += " (Server Core installation)"
		}
		return p
	}
	if display == "" {
		return ""
	}
	major := "10"
	if build >= 22000 {
		major = "11"
	}
	return "Windows " + major + " Version " + display
}

// windowsPrograms reads Programs and Features: the Uninstall keys of the
// machine (64-bit and 32-bit views) and of every loaded user profile. It
// returns the programs, and the updates listed there by KB number.
func windowsPrograms(reg Registry) ([]agentproto.Software, []agentproto.Update) {
	roots := []string{hklm + regUninstall, hklm + regUninstallWOW}
	if users, err := reg.SubKeys(regUsers); err == nil {
		for _, sid := range users {
			if strings.HasSuffix(sid, "_Classes") {
				continue
			}
			roots = append(roots, regUsers+`\`+sid+regUninstall)
		}
	}
	seen := map[agentproto.Software]bool{}
	var programs []agentproto.Software
	var kbs []agentproto.Update
	for _, root := range roots {
		subs, err := reg.SubKeys(root)
		if err != nil {
			continue
		}
		for _, sub := range subs {
			vals, err := reg.Values(root + `\` + sub)
			if err != nil {
				continue
			}
			text := func(name string) string { return strings.TrimSpace(vals[name].Text()) }
			display := text("DisplayName")
			if m := kbName.FindStringSubmatch(sub); m != nil {
				kbs = append(kbs, agentproto.Update{ID: "KB" + m[1], Title: display})
				continue
			}
			if display == "" || text("SystemComponent") == "1" || text("ParentKeyName") != "" {
				continue
			}
			switch text("ReleaseType") {
			case "Update", "Security Update", "Hotfix", "Service Pack":
				continue
			}
			sw := Application(display, text("DisplayVersion"), text("Publisher"))
			if !seen[sw] {
				seen[sw] = true
				programs = append(programs, sw)
			}
		}
	}
	return programs, kbs
}

// kbName matches a KB number in the name of a servicing package or an
// Uninstall key: "KB5034441", "Package_for_KB5034441~31bf3856ad364e35~amd64~~10.0.1.2".
var kbName = regexp.MustCompile(`(?i)(?:^|[_~])KB([0-9]{6,8})(?:$|[~_.])`)

// servicingKBs lists the KB numbers of the installed servicing packages
// (Component Based Servicing), which is where Win32_QuickFixEngineering
// finds them.
func servicingKBs(reg Registry) []agentproto.Update {
	subs, err := reg.SubKeys(regCBSPackages)
	if err != nil {
		return nil
	}
	var out []agentproto.Update
	for _, sub := range subs {
		m := kbName.FindStringSubmatch(sub)
		if m == nil {
			continue
		}
		// CurrentState 112 (0x70) is Installed; a package without the
		// value is taken as installed.
		if vals, err := reg.Values(regCBSPackages + `\` + sub); err == nil {
			if st, ok := vals["CurrentState"]; ok && st.Kind == RegNumber && st.Number != 0x70 {
				continue
			}
		}
		out = append(out, agentproto.Update{ID: "KB" + m[1]})
	}
	return out
}

// mergeUpdates merges lists of installed updates by id, keeping the first
// title found, in id order.
func mergeUpdates(lists ...[]agentproto.Update) []agentproto.Update {
	byID := map[string]agentproto.Update{}
	for _, list := range lists {
		for _, u := range list {
			id := strings.ToUpper(strings.TrimSpace(u.ID))
			if id == "" {
				continue
			}
			u.ID = id
			if have, ok := byID[id]; ok {
				if have.Title == "" {
					have.Title = u.Title
				}
				if have.Severity == "" {
					have.Severity = u.Severity
				}
				byID[id] = have
				continue
			}
			byID[id] = u
		}
	}
	out := make([]agentproto.Update, 0, len(byID))
	for _, u := range byID {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// clickToRunChannels names the Microsoft 365 Apps update channels by the
// GUID of their content URL.
var clickToRunChannels = map[string]string{
	"492350f6-3a01-4f97-b9c0-c7c6ddf67d60": "Current Channel",
	"64256afe-f5d9-4f86-8936-8840a6a4f5be": "Current Channel (Preview)",
	"55336b82-a18d-4dd6-b5f6-9e5095c314a6": "Monthly Enterprise Channel",
	"7ffbc6bf-bc32-4f92-8982-f9dd17fd3114": "Semi-Annual Enterprise Channel",
	"b8f9b850-328d-4355-9145-c59439a0c4cf": "Semi-Annual Enterprise Channel (Preview)",
	"5440fd1f-7ecb-4221-8110-145efaa6372f": "Beta Channel",
}

// clickToRun reads the Office Click-to-Run configuration.
func clickToRun(reg Registry) *ClickToRun {
	vals, err := reg.Values(regClickToRun)
	if err != nil {
		return nil
	}
	text := func(name string) string { return strings.TrimSpace(vals[name].Text()) }
	c := &ClickToRun{Version: text("VersionToReport"), Platform: text("Platform")}
	if c.Version == "" {
		return nil
	}
	for _, p := range strings.Split(text("ProductReleaseIds"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.Products = append(c.Products, p)
		}
	}
	url := text("UpdateChannel")
	if url == "" {
		url = text("CDNBaseUrl")
	}
	c.Channel = url
	for guid, name := range clickToRunChannels {
		if strings.Contains(strings.ToLower(url), guid) {
			c.Channel = name
		}
	}
	return c
}

// windowsRebootPending reports whether Windows waits for a restart to
// finish installing updates or replacing files.
func windowsRebootPending(reg Registry) bool {
	for _, key := range []string{regCBSRebootPending, regWURebootRequired} {
		if _, err := reg.Values(key); err == nil {
			return true
		}
	}
	if vals, err := reg.Values(regSessionManager); err == nil {
		if v, ok := vals["PendingFileRenameOperations"]; ok && len(v.Strings) > 0 {
			return true
		}
	}
	return false
}
