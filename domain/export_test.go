package domain

// SetTestHook makes hook run, on the calling goroutine, wherever m makes
// or undoes a registration outside its lock (between the accounting and
// fi_mr_reg, between leaving the live set and fi_close). Set it before m
// is shared.
func SetTestHook(m *Manager, hook func()) { m.testHook = hook }
