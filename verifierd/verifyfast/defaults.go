package verifyfast

import (
	"embed"
	"fmt"
)

// Defaults holds the example configuration shipped with the package:
// defaults/settings.yaml and defaults/strategy.yaml. They carry the spec's
// examples, with api_key_env names instead of keys and a local base_url.
//
//go:embed defaults/settings.yaml defaults/strategy.yaml
var Defaults embed.FS

// DefaultSettings returns the embedded defaults/settings.yaml.
func DefaultSettings() *Settings {
	s, err := ParseSettings("defaults/settings.yaml", mustRead("defaults/settings.yaml"))
	if err != nil {
		panic(fmt.Sprintf("verifyfast: embedded settings are invalid: %v", err))
	}
	return s
}

// DefaultStrategy returns the embedded defaults/strategy.yaml.
func DefaultStrategy() Strategy {
	s, err := ParseStrategy("defaults/strategy.yaml", mustRead("defaults/strategy.yaml"))
	if err != nil {
		panic(fmt.Sprintf("verifyfast: embedded strategy is invalid: %v", err))
	}
	return s
}

func mustRead(name string) []byte {
	b, err := Defaults.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("verifyfast: %v", err))
	}
	return b
}
