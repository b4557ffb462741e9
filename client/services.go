package client

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// Attach registers conn, a bound UDP socket, with santad. The daemon does
// not keep the socket: closing it in the application really closes it.
func (c *Client) Attach(conn syscall.Conn) (ServiceInfo, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return ServiceInfo{}, fmt.Errorf("attach: %w", err)
	}
	var s ServiceInfo
	var attachErr error
	// The fd is only valid inside Control.
	if err := raw.Control(func(fd uintptr) { s, attachErr = c.AttachFD(int(fd)) }); err != nil {
		return ServiceInfo{}, fmt.Errorf("attach: %w", err)
	}
	return s, attachErr
}

// AttachFD registers the socket fd; see Attach. fd stays the caller's.
func (c *Client) AttachFD(fd int) (ServiceInfo, error) {
	s, err := call[*protocol.ServiceInfo](c, &protocol.Attach{}, unix.UnixRights(fd))
	if err != nil {
		return ServiceInfo{}, fmt.Errorf("attach: %w", err)
	}
	return *s, nil
}

// Detach removes a service and all its rules.
func (c *Client) Detach(service uint32) error {
	if _, err := call[*protocol.DetachReply](c, &protocol.Detach{ServiceID: service}, nil); err != nil {
		return fmt.Errorf("detach service %d: %w", service, err)
	}
	return nil
}

// Services lists the client's services, or every service for an admin,
// in rising id order: every page of AllServices.
func (c *Client) Services() ([]ServiceInfo, error) {
	var all []ServiceInfo
	for s, err := range c.AllServices() {
		if err != nil {
			return nil, err
		}
		all = append(all, s)
	}
	return all, nil
}

// ServiceStats reads a service's counters.
func (c *Client) ServiceStats(service uint32) (ServiceStats, error) {
	r, err := call[*protocol.ServiceStatsReply](c, &protocol.ServiceStats{ServiceID: service}, nil)
	if err != nil {
		return ServiceStats{}, fmt.Errorf("stats of service %d: %w", service, err)
	}
	return *r, nil
}

// Status reads the daemon's state.
func (c *Client) Status() (Status, error) {
	r, err := call[*protocol.StatusReply](c, &protocol.Status{}, nil)
	if err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	return *r, nil
}
