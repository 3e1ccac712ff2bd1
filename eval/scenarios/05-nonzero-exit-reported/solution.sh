systemctl status sysward-no-such-unit --no-pager
# answer: The unit sysward-no-such-unit does not exist: systemctl says it could not be found (exit status 4).
