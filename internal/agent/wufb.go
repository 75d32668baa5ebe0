package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
)

// WindowsUpdatePolicy is the "windowsUpdate" setting of a policy object:
// Windows Update for Business deferrals and the release a ring stays on,
// written as the Group Policy values under
// HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate.
//
//	{"windowsUpdate": {"deferQualityUpdatesDays": 7, "deferFeatureUpdatesDays": 60,
//	                   "productVersion": "Windows 11", "targetReleaseVersion": "23H2"}}
type WindowsUpdatePolicy struct {
	// DeferQualityUpdatesDays delays monthly quality updates, 0 to 30.
	DeferQualityUpdatesDays *int `json:"deferQualityUpdatesDays"`
	// DeferFeatureUpdatesDays delays feature updates, 0 to 365.
	DeferFeatureUpdatesDays *int `json:"deferFeatureUpdatesDays"`
	// ProductVersion and TargetReleaseVersion keep the endpoint on a
	// release ("Windows 11", "23H2"); set together.
	ProductVersion       string `json:"productVersion"`
	TargetReleaseVersion string `json:"targetReleaseVersion"`
}

// WindowsUpdateSetting is the name of the policy setting that
// WindowsUpdatePolicy reads.
const WindowsUpdateSetting = "windowsUpdate"

// RegistryWriter is a Registry that values can be written to.
type RegistryWriter interface {
	Registry
	// SetValue sets a value, creating the key when it is missing.
	SetValue(key, name string, v RegValue) error
}

// regSetting is one registry value a policy sets.
type regSetting struct {
	key, name string
	value     RegValue
}

var releaseVersion = regexp.MustCompile(`^[0-9]{2}H[12]$|^[0-9]{4}$`)

// ParseWindowsUpdatePolicy returns the windowsUpdate setting of a policy's
// settings, nil when it has none, and an error when it does not parse or
// is out of bounds.
func ParseWindowsUpdatePolicy(settings json.RawMessage) (*WindowsUpdatePolicy, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(settings, &all); err != nil {
		return nil, fmt.Errorf("the settings are not a JSON object")
	}
	raw, ok := all[WindowsUpdateSetting]
	if !ok {
		return nil, nil
	}
	var p WindowsUpdatePolicy
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("%s: %v", WindowsUpdateSetting, err)
	}
	if _, err := p.registryValues(); err != nil {
		return nil, err
	}
	return &p, nil
}

// registryValues returns the registry values that p sets.
func (p *WindowsUpdatePolicy) registryValues() ([]regSetting, error) {
	var out []regSetting
	num := func(name string, n int) regSetting {
		return regSetting{regWindowsUpdatePol, name, RegValue{Kind: RegNumber, Number: uint64(n)}}
	}
	str := func(name, s string) regSetting {
		return regSetting{regWindowsUpdatePol, name, RegValue{Kind: RegString, String: s}}
	}
	if d := p.DeferQualityUpdatesDays; d != nil {
		if *d < 0 || *d > 30 {
			return nil, fmt.Errorf("%s.deferQualityUpdatesDays %d: want 0 to 30", WindowsUpdateSetting, *d)
		}
		out = append(out, num("DeferQualityUpdates", 1), num("DeferQualityUpdatesPeriodInDays", *d))
	}
	if d := p.DeferFeatureUpdatesDays; d != nil {
		if *d < 0 || *d > 365 {
			return nil, fmt.Errorf("%s.deferFeatureUpdatesDays %d: want 0 to 365", WindowsUpdateSetting, *d)
		}
		out = append(out, num("DeferFeatureUpdates", 1), num("DeferFeatureUpdatesPeriodInDays", *d))
	}
	if (p.ProductVersion == "") != (p.TargetReleaseVersion == "") {
		return nil, fmt.Errorf("%s: productVersion and targetReleaseVersion go together", WindowsUpdateSetting)
	}
	if p.TargetReleaseVersion != "" {
		if !releaseVersion.MatchString(p.TargetReleaseVersion) {
			return nil, fmt.Errorf("%s.targetReleaseVersion %q: want a release such as 23H2", WindowsUpdateSetting, p.TargetReleaseVersion)
		}
		if p.ProductVersion != "Windows 10" && p.ProductVersion != "Windows 11" {
			return nil, fmt.Errorf("%s.productVersion %q: want Windows 10 or Windows 11", WindowsUpdateSetting, p.ProductVersion)
		}
		out = append(out, num("TargetReleaseVersion", 1), str("TargetReleaseVersionInfo", p.TargetReleaseVersion),
			str("ProductVersion", p.ProductVersion))
	}
	return out, nil
}

// Apply writes the registry values of p.
func (p *WindowsUpdatePolicy) Apply(reg RegistryWriter) error {
	values, err := p.registryValues()
	if err != nil {
		return err
	}
	for _, s := range values {
		if err := reg.SetValue(s.key, s.name, s.value); err != nil {
			return fmt.Errorf("set %s\\%s: %w", s.key, s.name, err)
		}
	}
	return nil
}

// Check returns what of p the registry does not hold.
func (p *WindowsUpdatePolicy) Check(reg Registry) []string {
	values, err := p.registryValues()
	if err != nil {
		return []string{err.Error()}
	}
	var findings []string
	for _, s := range values {
		have := ""
		if vals, err := reg.Values(s.key); err == nil {
			if v, ok := vals[s.name]; ok {
				have = v.Text()
			}
		}
		if have != s.value.Text() {
			if have == "" {
				have = "not set"
			}
			findings = append(findings, fmt.Sprintf("Windows Update policy %s is %s, want %s", s.name, have, s.value.Text()))
		}
	}
	return findings
}

// CheckWindowsPolicy checks a policy's settings on a Windows endpoint
// whose registry is reg: the settings CheckPolicy knows, and the
// windowsUpdate setting against the registry.
func CheckWindowsPolicy(reg Registry, settings json.RawMessage, snap *Snapshot) (*bool, string) {
	compliant, findings, unchecked := CheckPolicy(settings, snap)
	p, err := ParseWindowsUpdatePolicy(settings)
	if err != nil {
		findings = append(findings, err.Error())
	}
	if p == nil && err == nil {
		return compliant, complianceMessage(findings, unchecked)
	}
	unchecked = slices.DeleteFunc(unchecked, func(s string) bool { return s == WindowsUpdateSetting })
	if p != nil {
		findings = append(findings, p.Check(reg)...)
	}
	ok := len(findings) == 0
	return &ok, complianceMessage(findings, unchecked)
}
