// A FAKE Confluent schema registry for Sluice's tests: franz-go's pkg/sr/srfake (an in-memory
// implementation of the registry's REST API) served on a fixed address. Not Confluent's
// server: no Kafka-backed storage, no compatibility checks beyond srfake's. Used because no
// real registry (Confluent's, Karapace, Apicurio) can be started here from the package
// registries within CI's budget; see tests/registry/registry.sh.
//
//	srfake -addr 127.0.0.1:18081 [-auth "Basic dXNlcjpwYXNz"]
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	auth := flag.String("auth", "", "the exact Authorization header value to require (empty: none)")
	flag.Parse()
	var opts []srfake.Option
	if *auth != "" {
		opts = append(opts, srfake.WithAuth(*auth))
	}
	registry := srfake.NewRegistry(opts...)
	log.Printf("srfake (a fake schema registry) listening on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, registry.Handler()))
}
