"""S3 operations as requests on a transport: the layer between _io and _transport."""
