// SPDX-License-Identifier: Apache-2.0

package server_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing/fstest"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
	"github.com/sluicehq/sluice/memstore"
)

func Example() {
	store := memstore.New()
	defer store.Close()
	srv, err := server.New(store)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := config.Load(fstest.MapFS{"rides.yaml": {Data: []byte(`
domain: rides
descriptors:
  - key: rider_id
    rate_limit: {unit: hour, requests_per_unit: 2, name: rider}
`)}})
	if err == nil {
		err = srv.Apply(c)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	h := srv.Handler() // serve it with http.Server; srv.RegisterGRPC for Envoy
	for i := 0; i < 3; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/check", strings.NewReader(
			`{"domain":"rides","descriptors":[{"entries":[{"key":"rider_id","value":"r-7"}]}]}`))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		fmt.Print(strings.Split(rec.Body.String(), `,"limit"`)[0], "\n")
	}
	// Output:
	// {"overall_code":"OK","allowed":true,"statuses":[{"code":"OK","rule":"rides.rider_id","name":"rider","algorithm":"fixed-window","allowed":true
	// {"overall_code":"OK","allowed":true,"statuses":[{"code":"OK","rule":"rides.rider_id","name":"rider","algorithm":"fixed-window","allowed":true
	// {"overall_code":"OVER_LIMIT","allowed":false,"statuses":[{"code":"OVER_LIMIT","rule":"rides.rider_id","name":"rider","algorithm":"fixed-window","allowed":false
}
