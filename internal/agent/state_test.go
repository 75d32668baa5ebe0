package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDiskStateRemoveDeletesTheEnrollSecret: a removed endpoint keeps
// nothing that could enroll it again, an installed agent's secret
// included, only the removal mark.
func TestDiskStateRemoveDeletesTheEnrollSecret(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenDiskState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, EnrollSecretFile), []byte("ples_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, EnrollSecretFile)); !os.IsNotExist(err) {
		t.Errorf("the enrollment secret survived the removal: %v", err)
	}
	if at, err := st.Removed(); at == nil || err != nil {
		t.Errorf("Removed = %v, %v", at, err)
	}
}
