module github.com/sluicehq/sluice

go 1.26.0

require (
	github.com/redis/rueidis v1.0.79 // indirect
	github.com/sethvargo/go-limiter v0.7.1 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
