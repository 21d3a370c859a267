"""The layered context: what each request to the model is built from."""
