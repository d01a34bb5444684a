from tests.platforms.server_kit import api as api  # a running API server
