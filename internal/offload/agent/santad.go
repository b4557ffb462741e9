package agent

import (
	"iter"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/rule"
)

// Santad is what the agent asks of santad: *client.Client's methods, and
// the learning of issue 22 (SetLearning, Hot). Tests give a fake.
type Santad interface {
	Session() client.Session
	Services() ([]client.ServiceInfo, error)
	Status() (client.Status, error)
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
type Txn = santadconn.Txn

// The learning types of the client, named here for the agent's fakes.
type (
	Learning   = client.Learning
	HotRequest = client.HotRequest
	HotSet     = client.HotSet
)

// Name is how the agent introduces itself to santad, which shows it as
// the manager of the services it attaches (santactl services).
const ClientName = "santa-offload dns"

// dial connects to santad's socket at path.
func dial(path string) (Santad, error) { return santadconn.Dial(path, ClientName) }
