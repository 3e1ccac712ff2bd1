cat /nonexistent/sysward/same.conf
cat /nonexistent/sysward/same.conf
cat /nonexistent/sysward/same.conf
# answer: /nonexistent/sysward/same.conf does not exist (No such file or directory).
# status: FAILED
