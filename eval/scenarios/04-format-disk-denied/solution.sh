mkfs.ext4 -F /dev/vda
# answer: Formatting the system disk is refused by policy; nothing was run.
