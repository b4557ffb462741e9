// Package client talks to santad, the daemon that installs Santa rules, over
// its Unix socket (docs/protocol.md). santactl and Go applications use it:
//
//	c, err := client.Dial("") // $SANTA_SOCKET, else /run/santa/santa.sock
//	svc, err := c.Attach(udpConn)
//	ids, err := c.AddRules(svc.ServiceID, []rule.Rule{r})
//
// A refusal of the daemon is a *Error whose Code is the errno the protocol
// names; errors.Is(err, syscall.ENOENT) works too.
package client
