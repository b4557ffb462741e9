package agent

import (
	"errors"
	"iter"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// Santad is what the agent asks of santad: *client.Client's methods, and
// the learning of issue 22 (SetLearning, Hot). Tests give a fake.
type Santad interface {
	Services() ([]client.ServiceInfo, error)
	AttachFD(fd int) (client.ServiceInfo, error)
	Detach(service uint32) error
	SetLearning(service uint32, l Learning) error
	Hot(service uint32, max int) (HotSet, error)
	Rules(service uint32) iter.Seq2[client.RuleEntry, error]
	RuleStats(service uint32) iter.Seq2[client.RuleCounters, error]
	AddRules(service uint32, rs []rule.Rule) ([]uint32, error)
	DeleteRules(service uint32, ids []uint32) error
	Begin(service uint32) (Txn, error)
	Close() error
}

// Txn is a transaction on one service (*client.Txn).
type Txn interface {
	ReplaceRules(updates []client.RuleEntry) error
	DeleteRules(ids []uint32) error
	Commit() (added int, err error)
	Abort() error
}

// Learning, HotRequest and HotSet are client.Learning, client.HotRequest
// and client.HotSet of the learning branch (issue 22, f22-learn), written
// here to its contract until the merge makes them aliases.
type (
	Learning struct {
		KeyOffset uint16
		ProbePort uint16
		Enabled   bool
	}
	HotRequest struct {
		Passes uint32
		Key    []byte
	}
	HotSet struct {
		Window   time.Duration
		Requests []HotRequest
	}
)

// dial connects to santad's socket at path.
func dial(path string) (Santad, error) {
	c, err := client.Dial(path)
	if err != nil {
		return nil, err
	}
	return santadClient{c}, nil
}

// santadClient is a *client.Client as a Santad.
type santadClient struct{ *client.Client }

func (c santadClient) Begin(service uint32) (Txn, error) { return c.Client.Begin(service) }

// errNoLearning is what the learning calls say until the merge with the
// learning branch removes the two methods below: the client then has them.
var errNoLearning = errors.New("this santad client has no learning (issue 22, branch f22-learn)")

func (santadClient) SetLearning(uint32, Learning) error { return errNoLearning }
func (santadClient) Hot(uint32, int) (HotSet, error)    { return HotSet{}, errNoLearning }
