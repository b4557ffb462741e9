package cli

import (
	"testing"

	"github.com/santa-offload/santa/client"
)

// services lists every service, over as many pages of LIST_SERVICES as
// santad gives (the fake's hold two).
func TestServicesPages(t *testing.T) {
	f, path := newFake(t)
	for port := range uint16(5) {
		f.addService(client.ServiceInfo{Protocol: 17, Family: 4, Port: 5300 + port, Addr: [16]byte{127, 0, 0, 1}, Cookie: 4097 + uint64(port), OwnerUID: 0},
			client.ServiceStats{})
	}
	checkOutputs(t, path, []output{{[]string{"services"}, `ID  PROTO  ADDRESS         OWNER  RULES  COOKIE  MANAGER
7   udp    127.0.0.1:5300  0      0      4097    -
8   udp    127.0.0.1:5301  0      0      4098    -
9   udp    127.0.0.1:5302  0      0      4099    -
10  udp    127.0.0.1:5303  0      0      4100    -
11  udp    127.0.0.1:5304  0      0      4101    -
`}})
}
