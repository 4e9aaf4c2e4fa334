package tokenizer

// CheckFrontend parses a model's frontend files exactly as ninfer-run
// (pkg/runner) does when it loads them: tokenizerJSON with tokenizerConfig
// through Load, generationConfig through ParseGenerationEOS and, with a
// tokenizer, SetGenerationConfig. nil or empty means the file is absent.
// ninfer-convert calls it before writing an artifact and ninfer-inspect
// --verify on the artifact's resources, so that a file run would refuse
// is refused there, naming the file, not at the first run.
func CheckFrontend(tokenizerJSON, tokenizerConfig, generationConfig []byte) error {
	var tok *Tokenizer
	if len(tokenizerJSON) > 0 {
		t, err := Load(tokenizerJSON, tokenizerConfig)
		if err != nil {
			return err
		}
		tok = t
	}
	if len(generationConfig) > 0 {
		if _, err := ParseGenerationEOS(generationConfig); err != nil {
			return err
		}
		if tok != nil {
			if err := tok.SetGenerationConfig(generationConfig); err != nil {
				return err
			}
		}
	}
	return nil
}
