package agent

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/go-ole/go-ole"
	"github.com/go-ole/go-ole/oleutil"

	"github.com/patchline/patchline/internal/agentproto"
)

// The Windows Update Agent and WMI through their COM automation
// interfaces (IUpdateSession, IUpdateSearcher, IUpdateInstaller;
// SWbemLocator), with go-ole. What the agent makes of their answers is in
// wua.go.

// pendingCriteria selects the updates a search lists as pending.
const pendingCriteria = "IsInstalled=0 and IsHidden=0 and Type='Software'"

// withCOM runs fn on a thread of its own with COM initialised, as COM
// calls need.
func withCOM(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := ole.CoInitializeEx(0, ole.COINIT_APARTMENTTHREADED); err != nil {
			var oe *ole.OleError
			if !errors.As(err, &oe) || oe.Code() != 1 { // S_FALSE: already initialised
				done <- fmt.Errorf("initialise COM: %w", err)
				return
			}
		}
		defer ole.CoUninitialize()
		done <- fn()
	}()
	return <-done
}

// com keeps the objects a call obtains, to release them together.
type com struct{ held []*ole.IDispatch }

func (c *com) release() {
	for i := len(c.held) - 1; i >= 0; i-- {
		c.held[i].Release()
	}
	c.held = nil
}

func (c *com) create(progID string) (*ole.IDispatch, error) {
	unk, err := oleutil.CreateObject(progID)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", progID, err)
	}
	defer unk.Release()
	d, err := unk.QueryInterface(ole.IID_IDispatch)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", progID, err)
	}
	c.held = append(c.held, d)
	return d, nil
}

// object calls a method or reads a property that returns an object.
func (c *com) object(d *ole.IDispatch, call bool, name string, args ...any) (*ole.IDispatch, error) {
	var v *ole.VARIANT
	var err error
	if call {
		v, err = oleutil.CallMethod(d, name, args...)
	} else {
		v, err = oleutil.GetProperty(d, name, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	obj := v.ToIDispatch()
	if obj == nil {
		return nil, fmt.Errorf("%s: not an object", name)
	}
	c.held = append(c.held, obj)
	return obj, nil
}

// value reads a property as a Go value (nil for a null).
func value(d *ole.IDispatch, name string, args ...any) any {
	v, err := oleutil.GetProperty(d, name, args...)
	if err != nil {
		return nil
	}
	defer v.Clear()
	return v.Value()
}

func text(d *ole.IDispatch, name string) string {
	s, _ := value(d, name).(string)
	return strings.TrimSpace(s)
}

func number(d *ole.IDispatch, name string) int {
	switch n := value(d, name).(type) {
	case int32:
		return int(n)
	case int64:
		return int(n)
	case int16:
		return int(n)
	case uint8:
		return int(n)
	case int:
		return n
	}
	return 0
}

func boolean(d *ole.IDispatch, name string) bool {
	b, _ := value(d, name).(bool)
	return b
}

// each calls fn with each item of a collection (Count and Item(i)).
func (c *com) each(coll *ole.IDispatch, fn func(i int, item *ole.IDispatch) error) error {
	n := number(coll, "Count")
	for i := 0; i < n; i++ {
		item, err := c.object(coll, false, "Item", i)
		if err != nil {
			return err
		}
		if err := fn(i, item); err != nil {
			return err
		}
	}
	return nil
}

// readUpdate reads an IUpdate.
func (c *com) readUpdate(u *ole.IDispatch) (WUAUpdate, error) {
	w := WUAUpdate{Title: text(u, "Title"), Severity: text(u, "MsrcSeverity"), Downloaded: boolean(u, "IsDownloaded")}
	if id, err := c.object(u, false, "Identity"); err == nil {
		w.ID = text(id, "UpdateID")
	}
	if kbs, err := c.object(u, false, "KBArticleIDs"); err == nil {
		n := number(kbs, "Count")
		for i := 0; i < n; i++ {
			if s, ok := value(kbs, "Item", i).(string); ok {
				w.KBs = append(w.KBs, s)
			}
		}
	}
	if cats, err := c.object(u, false, "Categories"); err == nil {
		c.each(cats, func(_ int, cat *ole.IDispatch) error {
			w.Categories = append(w.Categories, text(cat, "Name"))
			return nil
		})
	}
	if ib, err := c.object(u, false, "InstallationBehavior"); err == nil {
		w.Reboot = number(ib, "RebootBehavior") != 0
	}
	return w, nil
}

// session creates an update session that names Patchline as its client,
// as Windows Update's own logs then do.
func (c *com) session() (*ole.IDispatch, error) {
	session, err := c.create("Microsoft.Update.Session")
	if err != nil {
		return nil, err
	}
	oleutil.PutProperty(session, "ClientApplicationID", "Patchline")
	return session, nil
}

// search runs a Windows Update search and returns the updates with their
// COM objects.
func (c *com) search(criteria string) (*ole.IDispatch, []WUAUpdate, []*ole.IDispatch, error) {
	session, err := c.session()
	if err != nil {
		return nil, nil, nil, err
	}
	searcher, err := c.object(session, true, "CreateUpdateSearcher")
	if err != nil {
		return nil, nil, nil, err
	}
	res, err := c.object(searcher, true, "Search", criteria)
	if err != nil {
		return nil, nil, nil, err
	}
	coll, err := c.object(res, false, "Updates")
	if err != nil {
		return nil, nil, nil, err
	}
	var list []WUAUpdate
	var objs []*ole.IDispatch
	err = c.each(coll, func(_ int, u *ole.IDispatch) error {
		w, err := c.readUpdate(u)
		if err != nil {
			return err
		}
		list = append(list, w)
		objs = append(objs, u)
		return nil
	})
	return session, list, objs, err
}

// wuaSearch lists the pending updates.
func wuaSearch() (list []WUAUpdate, err error) {
	err = withCOM(func() error {
		var c com
		defer c.release()
		_, list, _, err = c.search(pendingCriteria)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("windows update search: %w", err)
	}
	return list, nil
}

// wuaHistory reads the last entries of the update history, newest first.
func wuaHistory(max int) (entries []WUAHistoryEntry, err error) {
	err = withCOM(func() error {
		var c com
		defer c.release()
		session, err := c.session()
		if err != nil {
			return err
		}
		searcher, err := c.object(session, true, "CreateUpdateSearcher")
		if err != nil {
			return err
		}
		total := 0
		if v, err := oleutil.CallMethod(searcher, "GetTotalHistoryCount"); err == nil {
			if n, ok := v.Value().(int32); ok {
				total = int(n)
			}
		}
		if total == 0 {
			return nil
		}
		hist, err := c.object(searcher, true, "QueryHistory", 0, min(total, max))
		if err != nil {
			return err
		}
		return c.each(hist, func(_ int, h *ole.IDispatch) error {
			e := WUAHistoryEntry{Operation: number(h, "Operation"), ResultCode: number(h, "ResultCode"), Title: text(h, "Title")}
			if t, ok := value(h, "Date").(time.Time); ok {
				e.Date = t
			}
			entries = append(entries, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("windows update history: %w", err)
	}
	return entries, nil
}

// wuaInstall downloads and installs the pending updates ids names (every
// security update when empty), or the staged feature upgrade when
// feature is true.
func wuaInstall(ids []string, feature bool) (out Outcome) {
	err := withCOM(func() error {
		var c com
		defer c.release()
		session, list, objs, err := c.search(pendingCriteria)
		if err != nil {
			return err
		}
		var selected []WUAUpdate
		if feature {
			for _, u := range list {
				if u.FeatureUpgrade() {
					selected = append(selected, u)
				}
			}
			if len(selected) == 0 {
				out = Failf("no feature upgrade is offered to this endpoint")
				return nil
			}
		} else if selected, err = SelectWUA(list, ids); err != nil {
			out = Failf("%v", err)
			return nil
		}
		if len(selected) == 0 {
			zero := 0
			out = Outcome{ExitCode: &zero, Message: "no security update is pending"}
			return nil
		}
		coll, err := c.create("Microsoft.Update.UpdateColl")
		if err != nil {
			return err
		}
		for _, s := range selected {
			for i, u := range list {
				if u.ID != s.ID {
					continue
				}
				if !boolean(objs[i], "EulaAccepted") {
					if _, err := oleutil.CallMethod(objs[i], "AcceptEula"); err != nil {
						return fmt.Errorf("accept the licence of %s: %w", s.UpdateID(), err)
					}
				}
				if _, err := oleutil.CallMethod(coll, "Add", objs[i]); err != nil {
					return fmt.Errorf("add %s: %w", s.UpdateID(), err)
				}
			}
		}
		downloader, err := c.object(session, true, "CreateUpdateDownloader")
		if err != nil {
			return err
		}
		if _, err := oleutil.PutProperty(downloader, "Updates", coll); err != nil {
			return fmt.Errorf("downloader: %w", err)
		}
		if _, err := c.object(downloader, true, "Download"); err != nil {
			return fmt.Errorf("download: %w", err)
		}
		installer, err := c.object(session, true, "CreateUpdateInstaller")
		if err != nil {
			return err
		}
		if _, err := oleutil.PutProperty(installer, "Updates", coll); err != nil {
			return fmt.Errorf("installer: %w", err)
		}
		ires, err := c.object(installer, true, "Install")
		if err != nil {
			return fmt.Errorf("install: %w", err)
		}
		res := WUAInstallResult{ResultCode: number(ires, "ResultCode"), HResult: int32(number(ires, "HResult")), RebootRequired: boolean(ires, "RebootRequired")}
		for i := range selected {
			ur, err := c.object(ires, true, "GetUpdateResult", i)
			if err != nil {
				break
			}
			res.Updates = append(res.Updates, WUAUpdateResult{ResultCode: number(ur, "ResultCode"), HResult: int32(number(ur, "HResult"))})
		}
		out = WUAOutcome(selected, res)
		return nil
	})
	if err != nil {
		return Failf("the Windows Update Agent: %v", err)
	}
	return out
}

// quickFixes lists Win32_QuickFixEngineering: the installed updates as
// WMI reports them.
func quickFixes() (out []agentproto.Update, err error) {
	err = withCOM(func() error {
		var c com
		defer c.release()
		locator, err := c.create("WbemScripting.SWbemLocator")
		if err != nil {
			return err
		}
		svc, err := c.object(locator, true, "ConnectServer", ".", `root\cimv2`)
		if err != nil {
			return err
		}
		res, err := c.object(svc, true, "ExecQuery", "SELECT HotFixID, Description, InstalledOn FROM Win32_QuickFixEngineering")
		if err != nil {
			return err
		}
		return oleutil.ForEach(res, func(v *ole.VARIANT) error {
			item := v.ToIDispatch()
			defer item.Release()
			id := text(item, "HotFixID")
			if kbName.MatchString(id) {
				title := text(item, "Description")
				if on := text(item, "InstalledOn"); on != "" {
					title = strings.TrimSpace(title + " installed " + on)
				}
				out = append(out, agentproto.Update{ID: strings.ToUpper(id), Title: title})
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("wmi Win32_QuickFixEngineering: %w", err)
	}
	return out, nil
}
