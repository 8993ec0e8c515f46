"""edgekit: Paddle model -> verified Paddle-Lite `.nb` bundle for ARM devices."""

__version__ = "0.1.0"
