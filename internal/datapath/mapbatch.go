package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// batchSize bounds one BPF_MAP_UPDATE_BATCH: large enough to amortise the
// syscall, small enough that a batch of rule bodies stays a few MiB.
const batchSize = 2048

// batchDelete deletes keys (a slice), ignoring keys already gone.
func batchDelete[K any](m *ebpf.Map, keys []K, what string) error {
	var errs []error
	for start := 0; start < len(keys); start += batchSize {
		chunk := keys[start:min(start+batchSize, len(keys))]
		if _, err := m.BatchDelete(chunk, nil); err != nil {
			// A batch stops at the first missing key: finish one by one.
			for _, k := range chunk {
				if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("deleting %s: %w", what, errors.Join(errs...))
	}
	return nil
}
