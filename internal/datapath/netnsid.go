package datapath

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// netnsID tells network namespaces apart: the device and inode of their
// nsfs file.
type netnsID struct{ dev, ino uint64 }

// threadNetns is the calling thread's network namespace.
func threadNetns() (netnsID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return netnsID{}, fmt.Errorf("reading the network namespace: %w", err)
	}
	return netnsID{dev: st.Dev, ino: st.Ino}, nil
}

// sameNetns refuses to attach from another network namespace than the one
// Open ran in: the data plane answers only for that namespace's addresses
// (local_addrs), so on another namespace's interface it would answer
// nothing, silently.
func (d *Datapath) sameNetns() error {
	here, err := threadNetns()
	if err != nil {
		return err
	}
	if here != d.netns {
		return fmt.Errorf("attaching in another network namespace than the data plane was opened in, whose addresses it answers for: open it in the namespace of the interfaces it serves")
	}
	return nil
}
