package domain_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
)

// Alloc's and AllocRegistered's mappings of HugePageAdviceMin bytes or
// more are advised MADV_HUGEPAGE (the kernel's "hg" flag of the mapping),
// shorter ones are not.
func TestAllocAdvisesHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("the kernel has no transparent huge pages: %v", err)
	}
	big, err := domain.Alloc(domain.HugePageAdviceMin)
	require.NoError(t, err)
	defer func() { assert.NoError(t, domain.Free(big)) }()
	small, err := domain.Alloc(domain.HugePageAdviceMin - os.Getpagesize())
	require.NoError(t, err)
	defer func() { assert.NoError(t, domain.Free(small)) }()
	assert.Contains(t, vmFlags(t, big), "hg", "a mapping of HugePageAdviceMin bytes")
	assert.NotContains(t, vmFlags(t, small), "hg", "a mapping shorter than a huge page")

	m := open(t, domain.Config{})
	defer m.Close()
	r, err := m.AllocRegistered(4*domain.HugePageAdviceMin, domain.AccessRecv)
	require.NoError(t, err)
	defer func() { assert.NoError(t, r.Close()) }()
	assert.Contains(t, vmFlags(t, r.Bytes()), "hg", "AllocRegistered")
	assertResident(t, r.Bytes())
}

// vmFlags returns the VmFlags of the mapping that holds mem, from
// /proc/self/smaps.
func vmFlags(t *testing.T, mem []byte) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	addr := uintptr(unsafe.Pointer(&mem[0]))
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return slices.Collect(strings.FieldsSeq(rest))
		}
	}
	require.NoError(t, sc.Err())
	require.Failf(t, "no mapping", "no mapping in /proc/self/smaps holds %#x", addr)
	return nil
}
