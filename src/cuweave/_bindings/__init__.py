"""ctypes declarations of NVIDIA's math libraries (loaded lazily) and their enums."""
