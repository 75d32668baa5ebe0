package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"
)

// DefaultServiceStateDir is the state directory of the installed agent:
// %ProgramData%\Patchline.
func DefaultServiceStateDir() string {
	pd := os.Getenv("ProgramData")
	if pd == "" {
		pd = `C:\ProgramData`
	}
	return filepath.Join(pd, "Patchline")
}

// stateDirSDDL gives SYSTEM and the Administrators full control of the
// state directory and its files, and nobody else anything; inheritance
// from the parent is cut.
const stateDirSDDL = "D:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"

// SecureStateDir creates dir readable only by SYSTEM and the
// Administrators.
func SecureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	sd, err := windows.SecurityDescriptorFromString(stateDirSDDL)
	if err != nil {
		return fmt.Errorf("security descriptor: %w", err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("security descriptor: %w", err)
	}
	err = windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("restrict %s to SYSTEM and Administrators: %w", dir, err)
	}
	return nil
}

// InstallService registers the agent as a Windows service that starts
// with the system and restarts when it fails, and starts it.
func InstallService(spec ServiceSpec) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager: %w", err)
	}
	defer m.Disconnect()
	if s, err := m.OpenService(ServiceName); err == nil {
		s.Close()
		return fmt.Errorf("the service %s exists already: run `patchline agent uninstall` first", ServiceName)
	}
	s, err := m.CreateService(ServiceName, spec.Executable, mgr.Config{
		DisplayName: "Patchline Agent",
		Description: "Reports this computer's software and updates to Patchline and runs the commands its administrators send.",
		StartType:   mgr.StartAutomatic,
	}, spec.Args...)
	if err != nil {
		return fmt.Errorf("create the service: %w", err)
	}
	defer s.Close()
	restart := mgr.RecoveryAction{Type: mgr.ServiceRestart, Delay: 30 * time.Second}
	if err := s.SetRecoveryActions([]mgr.RecoveryAction{restart, restart, restart}, 24*60*60); err != nil {
		return fmt.Errorf("set the service's recovery: %w", err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("start the service: %w", err)
	}
	return nil
}

// UninstallService deletes the agent's service, after stopping it when
// stop is set; the agent removed from Patchline deletes its own service
// without stopping it, and Windows removes it once the process ends.
func UninstallService(stop bool) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager: %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(ServiceName)
	if err != nil {
		return fmt.Errorf("the service %s is not installed", ServiceName)
	}
	defer s.Close()
	if st, err := s.Control(svc.Stop); stop && err == nil {
		for i := 0; i < 30 && st.State != svc.Stopped; i++ {
			time.Sleep(time.Second)
			if st, err = s.Query(); err != nil {
				break
			}
		}
	}
	if err := s.Delete(); err != nil {
		return fmt.Errorf("delete the service: %w", err)
	}
	return nil
}

// RunService runs run as the Windows service when the service control
// manager started this process (service is set: the command line
// `install` registers says so; else Windows is asked), and reports false
// otherwise. A stop or a shutdown cancels run's context.
func RunService(service bool, run func(ctx context.Context) error) (bool, error) {
	if !service {
		isService, err := svc.IsWindowsService()
		if err != nil || !isService {
			return false, err
		}
	}
	h := &serviceHandler{run: run}
	if err := svc.Run(ServiceName, h); err != nil {
		return true, err
	}
	return true, h.err
}

type serviceHandler struct {
	run func(ctx context.Context) error
	err error
}

// Execute implements svc.Handler.
func (h *serviceHandler) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.run(ctx) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case err := <-done:
			h.err = err
			status <- svc.Status{State: svc.StopPending}
			if err != nil && !errors.Is(err, context.Canceled) {
				return true, 1 // a failure: the recovery actions restart it
			}
			return false, 0
		case c := <-req:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending}
				cancel()
			}
		}
	}
}
