# The TEM (controller) and its client: see tem/.
