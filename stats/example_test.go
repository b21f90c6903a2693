package stats_test

import (
	"context"
	"fmt"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/stats"
)

// A snapshot lists what is open on a manager and keeps what closed
// endpoints counted in their kind's totals.
func Example() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()
	ln, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{OnData: func(*endpoint.ReceiveEndpoint, []byte) {}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	snd, err := endpoint.Dial(context.Background(), mgr, ln.Addr(), endpoint.SendConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func() {
		for _, k := range mgr.Snapshot().Kinds {
			if k.Kind == stats.KindBuffered {
				fmt.Println("live", k.Live, "opened", k.Opened, "closed", k.Closed)
			}
		}
	}
	show()
	snd.Close()
	show()
	// Output:
	// live 1 opened 1 closed map[]
	// live 0 opened 1 closed map[local:1]
}
