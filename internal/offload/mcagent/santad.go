package mcagent

import (
	"iter"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/santadconn"
)

// Santad is what the agent asks of santad: *client.Client's methods. Tests
// give a fake.
type Santad interface {
	Services() ([]client.ServiceInfo, error)
	AttachFD(fd int) (client.ServiceInfo, error)
	Detach(service uint32) error
	SetParser(service uint32, p client.Parser) error
	SetLearning(service uint32, l client.Learning) error
	Hot(service uint32, max int) (client.HotSet, error)
	Generations(service uint32, keys [][]byte) ([]client.Generation, error)
	Rules(service uint32) iter.Seq2[client.RuleEntry, error]
	RuleStats(service uint32) iter.Seq2[client.RuleCounters, error]
	AddGuardedRules(service uint32, rs []client.GuardedRule) ([]uint32, error)
	DeleteRules(service uint32, ids []uint32) error
	Begin(service uint32) (Txn, error)
	MemcachedStats(service uint32) (client.MemcachedStats, error)
	Close() error
}

// Txn is a transaction on one service (*client.Txn).
type Txn = santadconn.Txn

// ClientName is how the agent introduces itself to santad, which shows it
// as the manager of the services it attaches (santactl services).
const ClientName = "santa-offload memcached"

// dial connects to santad's socket at path.
func dial(path string) (Santad, error) { return santadconn.Dial(path, ClientName) }
