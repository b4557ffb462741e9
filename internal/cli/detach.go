package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
)

type detachOptions struct{}

func (*detachOptions) flags(*flag.FlagSet) {}

func (*detachOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 1, 1)
	if err != nil {
		return err
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	if err := c.Detach(service); err != nil {
		return err
	}
	return e.show(detached{ServiceID: service})
}

type detached struct {
	ServiceID uint32 `json:"service_id"`
}

func (v detached) table(w io.Writer) error {
	_, err := fmt.Fprintf(w, "detached service %d\n", v.ServiceID)
	return err
}
