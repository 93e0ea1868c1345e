package verifyfast

import "github.com/vera-run/vera/internal/yamlconf"

// ConfigError is one problem in settings.yaml or strategy.yaml. It prints as
//
//	settings.yaml:12: profiles.cross-verify.verify: unknown llm "qwen"
type ConfigError = yamlconf.Error

// ConfigErrors is every problem found in a file, in line order. The loaders
// return it as their error; errors.As finds it.
type ConfigErrors = yamlconf.Errors
