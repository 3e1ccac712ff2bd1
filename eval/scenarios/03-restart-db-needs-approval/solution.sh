systemctl restart mysql
# answer: The restart of mysql needs an operator's approval; it was not run.
