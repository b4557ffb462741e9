package daemon

import "github.com/santa-offload/santa/internal/model"

// Plane is the data plane as santad runs it: what serving clients needs
// (Dataplane), what restoring an earlier run's services needs (Restorer),
// and starting and stopping it. A *datapath.Datapath; cmd/santad opens it,
// so that this package builds without the data path's BPF objects.
type Plane interface {
	Dataplane
	Restorer
	WatchSockets(cgroupPath string, closed func(model.ServiceID, model.SocketInfo)) error
	Attach(ifname string) (model.Attachment, error)
	DetachStale() error
	EndRestore() []model.ServiceID
	HandOverConnections() (model.HandOver, error)
	ReleaseLeftConnections() (model.HandOver, error)
	Close() error
}

// OpenPlane loads the data plane with Config's settings. With keepLinks,
// an earlier run's pinned links keep answering with its maps until this
// run has restored the rules and takes them over.
type OpenPlane func(keepLinks bool) (Plane, error)
