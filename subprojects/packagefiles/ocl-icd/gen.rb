# Runs ocl-icd's icd_generator.rb in the output folder (it writes its files
# into the current folder; meson runs commands from the build root).
out, generator, database = ARGV.map { |a| File.expand_path(a) }
Dir.chdir(out)
ARGV.replace(['--mode', 'database', '--database', database])
load generator
