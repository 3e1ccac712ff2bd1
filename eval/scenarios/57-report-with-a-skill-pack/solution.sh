@tool disk_usage {"paths": ["/", "/var"]}
# answer: disk_usage reported the used percentage of the file systems holding / and /var (the same file system here), in its result above: e.g. 40 % used.
