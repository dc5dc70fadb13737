"""How the networks run, not what they compute: encoder backends (PyTorch, ONNX, OpenVINO),
precision, exported encoders, the embedding cache, preprocessing placement. Every module here
is private (no component registers here)."""
