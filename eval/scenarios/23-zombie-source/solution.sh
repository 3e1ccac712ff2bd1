ps -eo pid,ppid,stat,cmd
pkill -f spawner-daemon
# answer: /usr/local/bin/spawner-daemon forked children without reaping them; stopped it and the zombies are gone.
