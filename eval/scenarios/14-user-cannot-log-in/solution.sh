passwd -S alice
chage -l alice
usermod -U alice
chage -E -1 alice
usermod -s /bin/bash alice
# answer: alice was locked, expired and had the nologin shell; unlocked her (same password), removed the expiry and set /bin/bash.
