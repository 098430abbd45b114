"""The discrete side of Transformer Programs: IR, extraction, code generation, interpretation."""
